"""The main job: build and publish every shipped release into the local store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.run import run_release
from schemas.errors import ContractViolation, PrivfairError
from schemas.spec import load_spec

SPECS = Path(__file__).parent / "specs"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Publish every shipped release.")
    p.add_argument("--store", default="releases")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    failed = 0
    for path in sorted(SPECS.glob("*.yaml")):
        try:
            out = run_release(load_spec(path), args.store, args.data_dir)
        except (ContractViolation, PrivfairError) as e:
            print(f"{path.stem}: NOT published: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"{out.status:<10} {out.pipeline:<20} {out.version}  {out.path}")
    print(f"releases in {Path(args.store).resolve()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
