"""The commands about capacity: how many slots fit in memory (``plan``), which slot count
meets service-level objectives (``slo``), and how near decoding runs to the bound memory
bandwidth sets (``roofline``)."""

from __future__ import annotations

import argparse
from typing import Any

import psutil
from rich.console import Console
from rich.markup import escape

from workbench.cli.bounds import (
    BANDWIDTH_GBS,
    DECODE_TOK_S,
    MEMORY_GIB,
    OVERHEAD_MIB,
    PLAN_CTX,
    PLAN_PER_SLOT,
    PLAN_SLOTS,
    PLAN_UBATCH,
    SECONDS,
    SHARE_ONLINE,
    TOKENS,
    USERS,
)
from workbench.cli.paths import SESSION_HELP, session_file
from workbench.cli.tables import (
    footprint_note,
    model_line,
    plan_table,
    recurrent_note,
    roofline_table,
    slo_table,
    window_note,
)
from workbench.engine.analysis.planner import plan, usable_memory
from workbench.engine.analysis.roofline import session_roofline
from workbench.engine.analysis.slo import Slo, goodput, parse_goodput, peak_users, recommend
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import StartupFacts
from workbench.engine.measure import hardware
from workbench.engine.models.memory import read_model_facts
from workbench.engine.models.model_file import resolve_model
from workbench.engine.store import open_session


# -- parsers ----------------------------------------------------------------------------------
def add_plan(sub: Any) -> None:
    parser = sub.add_parser("plan", help="how many slots fit in memory, for a model")
    parser.add_argument("model", help="GGUF model file, or default (the bundled model)")
    parser.add_argument(
        "--ctx", type=PLAN_CTX, default="4096,8192,16384", help="contexts, comma-separated"
    )
    parser.add_argument(
        "--slots",
        type=PLAN_SLOTS,
        default="1,2,4,8",
        help="slot counts, comma-separated (-1: auto)",
    )
    parser.add_argument("--kv-type", default="f16", help="KV cache type for K and V (f16, q8_0...)")
    parser.add_argument("--unified", action="store_true", help="one KV pool for all slots (-kvu)")
    parser.add_argument(
        "--kv-unified-per-slot",
        type=PLAN_PER_SLOT,
        metavar="N",
        help="one unified pool of slots x N tokens, N a request (--ctx is then not used)",
    )
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="plan for the first NVIDIA GPU's memory (NVML or nvidia-smi) instead of RAM",
    )
    parser.add_argument(
        "--memory-gib",
        type=MEMORY_GIB,
        help="memory to plan for (default: this machine's available RAM)",
    )
    parser.add_argument(
        "--facts-from",
        metavar="SESSION",
        type=session_file,
        help="a session of this model run on this machine: its server's startup facts say "
        "what a GPU holds (on Metal, the working set it may use)",
    )
    parser.add_argument(
        "--overhead-mib",
        type=OVERHEAD_MIB,
        help="the server process's own memory beyond its buffers (default: estimated from the "
        "model's vocabulary, about 36 MiB for 49k tokens)",
    )
    parser.add_argument(
        "--flash-attn",
        choices=("on", "off"),
        default="on",
        help="flash attention (-fa; on: what llama-server's auto picks on CPU, CUDA and Metal)",
    )
    parser.add_argument(
        "--ubatch",
        type=PLAN_UBATCH,
        default=512,
        help="micro-batch size (-ub, 512): a sliding-window model's windowed cache holds it",
    )
    parser.add_argument(
        "--swa-full",
        action="store_true",
        help="windowed layers keep the whole context too (llama-server's --swa-full)",
    )
    parser.add_argument(
        "--need",
        type=TOKENS,
        default=0,
        help="tokens a request needs (prompt + max tokens): warn below it",
    )
    parser.set_defaults(handler=cmd_plan)


def add_slo(sub: Any) -> None:
    slo = sub.add_parser("slo", help="goodput against SLOs, and the slot count to run")
    slo.add_argument("session", type=session_file, help=SESSION_HELP)
    slo.add_argument("--ttft", type=SECONDS, help="TTFT limit in s (per request and p50)")
    slo.add_argument("--ttft-p90", type=SECONDS, help="TTFT p90 limit in s")
    slo.add_argument("--decode", type=DECODE_TOK_S, help="minimum per-request decode tok/s")
    slo.add_argument("--e2e-p90", type=SECONDS, help="end-to-end latency p90 limit in s")
    slo.add_argument(
        "--goodput",
        nargs="+",
        metavar="KEY:MS",
        help="vLLM's spelling, per-request limits in ms a good request meets, e.g. "
        "ttft:500 tpot:50 e2el:3000 (ttft and e2el also judge the p50 and p90 as --ttft "
        "and --e2e-p90 do)",
    )
    slo.add_argument("--registered", type=USERS, help="registered users (planning arithmetic)")
    slo.add_argument(
        "--online",
        type=SHARE_ONLINE,
        default=0.05,
        help="share of registered users online at peak, above 0 and at most 1 (0.05)",
    )
    slo.set_defaults(handler=cmd_slo)


def add_roofline(sub: Any) -> None:
    roof = sub.add_parser("roofline", help="decode speed against the memory-bandwidth bound")
    roof.add_argument("session", type=session_file, help=SESSION_HELP)
    roof.add_argument(
        "--bandwidth-gbs",
        type=BANDWIDTH_GBS,
        help="memory bandwidth in GB/s (default: measured once on this machine)",
    )
    roof.add_argument("--remeasure", action="store_true", help="measure the bandwidth again")
    roof.set_defaults(handler=cmd_roofline)


# -- commands ---------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    model = read_model_facts(resolve_model(args.model))
    available, where = _memory_to_plan_for(args)
    facts = _server_facts(args.facts_from) if args.facts_from else None
    available, where = usable_memory(available, where, facts)
    repack = not args.gpu and not (facts and facts.layers_offloaded)
    flash_attn = args.flash_attn == "on"
    rows = plan(
        model,
        args.ctx,
        args.slots,
        available,
        unified=args.unified or args.kv_unified_per_slot is not None,
        type_k=args.kv_type,
        type_v=args.kv_type,
        runtime=args.overhead_mib,
        need_tokens=args.need,
        per_slot=args.kv_unified_per_slot,
        ubatch=args.ubatch,
        swa_full=args.swa_full,
        flash_attn=flash_attn,
        repack=repack,
    )
    console.print(model_line(model, args.kv_type, available, where), markup=False, highlight=False)
    console.print(plan_table(rows))
    notes = (
        footprint_note(model, rows, args.ubatch, flash_attn, repack),
        window_note(model, args.ubatch, args.swa_full),
        recurrent_note(model),
    )
    for note in notes:
        if note:
            console.print(note, markup=False, highlight=False)
    return 0


def _server_facts(path: str) -> StartupFacts:
    """The startup facts of the last configuration of ``path`` whose server got ready."""
    with open_session(path) as session:
        found = [c.facts for c in session.configs if c.facts is not None]
    if not found:
        raise WorkbenchError(f"{path}: no configuration's server got ready, so no startup facts")
    return found[-1]


def _memory_to_plan_for(args: argparse.Namespace) -> tuple[int, str]:
    """Bytes to plan for and where they come from: given, a GPU's, or the free RAM."""
    if args.memory_gib is not None:
        return int(args.memory_gib * 2**30), "given"
    if args.gpu:
        gpus = hardware.nvidia_gpus()
        if not gpus:
            raise WorkbenchError(
                "--gpu: no NVIDIA GPU found (neither NVML nor nvidia-smi "
                "answered); give the memory with --memory-gib"
            )
        return gpus[0].memory_bytes or 0, f"VRAM of {gpus[0].name}"
    return psutil.virtual_memory().available, "free RAM"


# Each Slo field a flag of its own sets (``--goodput`` sets some of them too).
SLO_FLAGS = {
    "ttft_s": "--ttft",
    "ttft_p90_s": "--ttft-p90",
    "decode_tok_s": "--decode",
    "e2e_p90_s": "--e2e-p90",
}


def _slo(args: argparse.Namespace) -> Slo:
    """The SLOs the flags give, ``--goodput``'s among them; each limit given once."""
    limits = {name: getattr(args, flag[2:].replace("-", "_")) for name, flag in SLO_FLAGS.items()}
    try:
        from_goodput = parse_goodput(args.goodput or ())
    except ValueError as exc:
        raise WorkbenchError(str(exc)) from None
    for name, seconds in from_goodput.items():
        if limits.get(name) is not None:
            raise WorkbenchError(f"--goodput sets the limit {SLO_FLAGS[name]} gave: give it once")
        limits[name] = seconds
    try:
        return Slo(**limits)
    except ValueError:
        raise WorkbenchError(
            f"give at least one SLO: {', '.join(SLO_FLAGS.values())}, --goodput"
        ) from None


def cmd_slo(args: argparse.Namespace, console: Console) -> int:
    slo = _slo(args)
    with open_session(args.session) as session:
        results = goodput(session, slo)
    console.print(f"SLO: {slo.describe()}", markup=False)
    peak = peak_users(args.registered, args.online) if args.registered else None
    console.print(slo_table(results, peak))
    if peak is not None:
        console.print(
            f"peak concurrent users = {args.registered} registered x {args.online:g} "
            f"online = {peak}",
            markup=False,
        )
    console.print(f"recommendation: {recommend(results).text}", markup=False)
    return 0


def cmd_roofline(args: argparse.Namespace, console: Console) -> int:
    report = session_roofline(args.session, args.bandwidth_gbs, refresh=args.remeasure)
    console.print(
        f"memory bandwidth: {report.bandwidth / 1e9:.1f} GB/s ({report.how})", markup=False
    )
    if report.recorded_on:
        console.print(
            f"[yellow]the session was recorded on {escape(report.recorded_on)}: give its "
            "bandwidth with --bandwidth-gbs for a fair bound[/yellow]"
        )
    console.print(roofline_table(report.rows))
    return 0
