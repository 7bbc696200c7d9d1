"""Model zoo: the paper's benchmark models (ResNet-50, Inception-V3, BERT-base), tiny test models,
the graph dataset (`placement_gym.models.dataset`), and loading of user models (OpenVINO IR, ONNX, ``ov.Model``). See :mod:`placement_gym.models.zoo`."""

from .dataset import dataset_entries, dataset_names
from .synthetic import synthetic_graph
from .zoo import ZOO, example_inputs, load_graph, load_model, model_cache_dir, zoo_names

__all__ = ["ZOO", "dataset_entries", "dataset_names", "example_inputs", "load_graph", "load_model", "model_cache_dir", "synthetic_graph", "zoo_names"]
