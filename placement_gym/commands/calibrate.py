"""``calibrate``: measure a device profile for the simulated backend on this machine's real devices."""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import files


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure a device profile for the simulated backend on this machine's real devices."""
    from ..backends.calibration import calibrate
    from ..devices import two_cpu_devices

    out = Path(args.out)
    files.check_outputs({"--out": out}, args.overwrite,  # checked before the minutes of measuring
                          inputs={f"--model {model}": model for model in args.model})
    profile = calibrate(args.devices or two_cpu_devices(), args.model, runs=args.runs, warmup=args.warmup,
                        placements=args.placements, seed=args.seed, statistic=args.statistic, clock=args.clock,
                        name=args.name or out.stem, segments=args.segments, segment_rounds=args.segment_rounds,
                        progress=print)
    try:
        profile.save(out, overwrite=args.overwrite)
    except OSError as exc:  # minutes of measuring are not lost to a full disk or a folder gone read-only
        kept = files.keep_records(profile.to_dict(), "calibrate-profile", near=out)
        where = f"the measured profile is in {kept}" if kept else "no folder could take the measured profile"
        raise files.OutputError(f"cannot write --out {out}: {files.os_error_text(exc)}; {where}") from None
    print(f"wrote {out}; use it with DevicePlacementEnv(model, backend='simulated', profile='{out}')")
    return 0
