"""The ``wizard-arena`` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from wizard import Ruleset, Variant


def _print(result: dict, as_json: bool) -> None:  # type: ignore[type-arg]
    if as_json:
        print(json.dumps(result, separators=(",", ":")))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")


def _bench_engine(args: argparse.Namespace) -> None:
    from bench.engine import bench_engine

    _print(bench_engine(args.ruleset, args.players, args.variant or [], args.seconds, args.seed), args.json)


def _bench_bots(args: argparse.Namespace) -> None:
    from bench.bots import bench_bots

    _print(bench_bots(args.matches, args.players, args.ruleset, args.seed), args.json)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wizard-arena", description="Wizard Arena: bots play the card game Wizard.")
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="benchmarks (figures go to BENCHMARKS.md)")
    benches = bench.add_subparsers(dest="bench", required=True)

    engine = benches.add_parser("engine", help="full random matches through the rules engine, one process")
    engine.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    engine.add_argument("--players", type=int, default=4, choices=range(3, 7))
    engine.add_argument("--variant", action="append", choices=[v.value for v in Variant], help="repeat for several")
    engine.add_argument("--seconds", type=float, default=5.0, help="total run time (half per path)")
    engine.add_argument("--seed", type=int, default=1)
    engine.add_argument("--json", action="store_true", help="print one JSON line")
    engine.set_defaults(run=_bench_engine)

    bots = benches.add_parser("bots", help="house bots' mean scores and bid accuracy")
    bots.add_argument("--matches", type=int, default=200, help="matches per setting")
    bots.add_argument("--players", type=int, default=4, choices=range(3, 7))
    bots.add_argument("--ruleset", default="WIZARD", choices=[r.value for r in Ruleset])
    bots.add_argument("--seed", type=int, default=1)
    bots.add_argument("--json", action="store_true", help="print one JSON line")
    bots.set_defaults(run=_bench_bots)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except ValueError as e:  # the engine's errors say what to do
        sys.exit(f"wizard-arena: {e}")


if __name__ == "__main__":
    main()
