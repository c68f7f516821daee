"""`kvsim sweep SCENARIO [--set key=v1,v2 ...] --dask ADDRESS|local:N [-o DIR] [--no-report]`:
the sweep of `kvsim sweep`, its points run as tasks on a Dask cluster. It writes what the local
sweep writes (point-N/ folders, sweep.csv, the report), bit for bit, and exits as it does: 0, 1 if
a request failed or its bytes differ, 2 if a point produced no result or the input is bad.
"""
import argparse
import os
import sys

import kvsim
from kvsim import on_dask
from kvsim.results import SweepError


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kvsim sweep", description=__doc__.split("\n")[0])
    parser.add_argument("scenario")
    parser.add_argument("-o", "--out", default="out")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="ignored: the cluster decides")
    parser.add_argument("--no-report", action="store_true")
    parser.add_argument("--dask", required=True, metavar="ADDRESS",
                        help='a scheduler address ("tcp://host:8786") or "local:N"')
    args = parser.parse_args(argv)
    if not os.path.isfile(args.scenario):
        parser.error(f"scenario: {args.scenario} is not a file")
    try:
        client = on_dask.connect(args.dask)
    except (OSError, ValueError, TimeoutError) as e:
        print(f"kvsim: --dask {args.dask}: {e}", file=sys.stderr)
        return 2
    with client:
        try:
            study = kvsim.sweep(args.scenario, args.set or None, out_dir=args.out,
                                report=not args.no_report, client=client)
        except SweepError as e:
            for i, why in e.errors.items():
                print(f"kvsim: point {i}: {why}", file=sys.stderr)
            return 2
        except (ValueError, TypeError) as e:
            print(f"kvsim: {e}", file=sys.stderr)
            return 2
    report = "" if args.no_report else f", report {args.out}/index.html"
    print(f"sweep of {len(study)} points on {args.dask}: {args.out}/sweep.csv{report}")
    return 0 if all(r.ok for r in study) else 1


if __name__ == "__main__":
    sys.exit(main())
