"""The app decoder's MTP drafts at depths 1-4 against an independent reference computed from the
checkpoint's weights (qwen_mtp_desktop.devtools.mtp_reference: fp32 torch, the MTP head written
from the `mtp.*` tensors), on any exported model whose checkpoint you have (issue 26 item 6).

For every step that drafts, the decoder's drafts are recorded (`AppDecoder.draft_log`) and the
reference computes what each depth should propose at the same context, fed the decoder's own
earlier drafts. Printed per depth setting: agreement at every draft position, the acceptance the
decoder got (the app's own statistics), and the reference target's agreement with the decoder's
tokens; then every disagreement's logit margin (the reference's lead of its draft over the
decoder's, next to the worst case the INT8 draft head can erase), so near-ties are told apart
from faults; and which hidden state the decoder's chain follows: agreement with a reference
chained on the MTP output after its final norm (right) and before it (ik_llama.cpp #1815's bug),
and how many chains the two rules tell apart on this model at all.

    .venv/bin/python benchmarks/mtp_chain_check.py --model WORK/qwen3.5-0.8b-bigram-int4 \\
        --checkpoint WORK/qwen3.5-0.8b-bigram-ckpt      # folders built by fullsize.py
    .venv/bin/python benchmarks/mtp_chain_check.py --smoke   # the demo model, checks
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

#: The friendly name `fullsize.py` (`scale_embeddings`) gives the bigram variant's tuned scale.
EMBEDDING_SCALE = "bigram_embedding_scale"
NUMERICS = ("exact", "default")


def embedding_scale(model_dir: Path) -> float:
    """The scale `fullsize.py` multiplied the exported embeddings by (1.0 when there is none):
    the checkpoint does not carry it, so the reference must apply it too."""
    import openvino as ov

    model = ov.Core().read_model(model_dir / "openvino_text_embeddings_model.xml")
    for op in model.get_ordered_ops():
        if op.get_friendly_name() == EMBEDDING_SCALE:
            for value in op.input_values():
                node = value.get_node()
                if node.get_type_name() == "Constant":
                    return float(node.get_data().reshape(-1)[0])
    return 1.0


@dataclass
class DepthResult:
    depth: int
    agreement: list[tuple[int, int]]  # (agreed, compared) per draft position
    acceptance: float
    acceptance_by_position: list[float]
    target_agreed: int
    target_compared: int
    mismatches: list[Any] = field(default_factory=list)  # DraftComparison
    pre_norm_later: tuple[int, int] = (0, 0)  # depth >= 2 agreement with a pre-norm chain
    post_norm_later: tuple[int, int] = (0, 0)
    sensitive: tuple[int, int] = (0, 0)  # chains the two rules tell apart / chains
    raw_target_first: tuple[int, int] = (0, 0)  # depth 1 vs a reference fed the raw state
    gaps: list[float] = field(default_factory=list)  # the reference's runner-up gap per draft


def _rate(pair: tuple[int, int]) -> float:
    return pair[0] / pair[1] if pair[1] else float("nan")


def check_depth(
    under_test: Any,
    reference: Any,
    prompts: list[str],
    depth: int,
    tokens: int,
    ignore_eos: bool,
    prepared_cache: dict[tuple[int, ...], Any],
) -> DepthResult:
    from qwen_mtp_desktop.devtools.mtp_chain_check import by_position, chain_sensitivity, compare

    drafts: list[Any] = []
    drafted = accepted = 0
    positions = [[0, 0] for _ in range(depth)]
    target = [0, 0]
    later = {"post_norm": [0, 0], "pre_norm": [0, 0]}
    raw = [0, 0]
    sensitive = [0, 0]
    for text in prompts:
        run = under_test.run(text, depth, tokens, ignore_eos=ignore_eos)
        run_drafted, run_accepted, by_pos = run.acceptance()
        drafted, accepted = drafted + run_drafted, accepted + run_accepted
        for index, rate in enumerate(by_pos):
            steps = sum(1 for _, d in run.draft_log if len(d) > index)
            positions[index][0] += round(rate * steps)
            positions[index][1] += steps
        # Greedy answers are the same at every depth (that is the decoder's promise), so the
        # reference's pass over a token sequence is computed once.
        key = tuple(run.tokens)
        if key not in prepared_cache:
            prepared_cache[key] = reference.prepare(run.tokens)
        prepared = prepared_cache[key]
        results = {}
        for rule in ("post_norm", "pre_norm"):
            results[rule] = result = compare(reference, run, chain_hidden=rule, prepared=prepared)
            deep = [d for d in result.drafts if d.position >= 2]
            later[rule][0] += sum(d.agrees for d in deep)
            later[rule][1] += len(deep)
        drafts += results["post_norm"].drafts
        target[0] += results["post_norm"].target_agreed
        target[1] += results["post_norm"].target_compared
        differ, chains = chain_sensitivity(results["post_norm"], results["pre_norm"])
        sensitive[0] += differ
        sensitive[1] += chains
        if depth == 1:  # LightLLM #1402's bug: the target's state before its final norm
            raw_drafts = compare(reference, run, target_hidden="pre_norm").drafts
            raw[0] += sum(d.agrees for d in raw_drafts)
            raw[1] += len(raw_drafts)
    tallies = by_position(drafts, depth)
    return DepthResult(
        depth,
        [(t.agreed, t.compared) for t in tallies],
        accepted / drafted if drafted else 0.0,
        [a / b if b else 0.0 for a, b in positions],
        target[0],
        target[1],
        [m for t in tallies for m in t.mismatches],
        (later["pre_norm"][0], later["pre_norm"][1]),
        (later["post_norm"][0], later["post_norm"][1]),
        (sensitive[0], sensitive[1]),
        (raw[0], raw[1]),
        [d.top_margin for d in drafts],
    )


def report(numerics: str, results: list[DepthResult], slack: float) -> None:
    print(f"\n## {numerics} numerics")
    for r in results:
        agreement = " ".join(f"{_rate(p):.1%}" for p in r.agreement)
        counts = " ".join(f"{a}/{c}" for a, c in r.agreement)
        by_pos = " ".join(f"{v:.3f}" for v in r.acceptance_by_position)
        print(
            f"depth {r.depth} | agreement by position {agreement} ({counts}) | acceptance "
            f"{r.acceptance:.3f} by position {by_pos} | target agreement "
            f"{_rate((r.target_agreed, r.target_compared)):.1%}"
        )
    mismatches = [m for r in results for m in r.mismatches]
    near = [m for m in mismatches if m.near_tie(slack)]
    print(
        f"disagreements: {len(mismatches)}, near-ties {len(near)} (reference lead <= INT8 "
        f"head's worst case + {slack})"
    )
    if mismatches:
        leads = sorted(m.margin for m in mismatches)
        print(
            f"reference lead at disagreements: median {statistics.median(leads):.4f}, "
            f"max {leads[-1]:.4f}"
        )
        # Where a lead sits among the reference's own winner-vs-runner-up gaps: a lead below
        # almost all of them is a near-tie, whatever the logits' scale.
        gaps = sorted(g for r in results for g in r.gaps)
        print(
            f"reference runner-up gap over all {len(gaps)} drafts: median "
            f"{statistics.median(gaps):.4f}"
        )
        for m in sorted(mismatches, key=lambda m: -m.margin)[:8]:
            below = sum(g <= m.margin for g in gaps) / len(gaps)
            print(
                f"  {m.prompt[:40]!r} context {m.context_len} position {m.position}: decoder "
                f"{m.decoder}, reference {m.reference} (full vocabulary {m.reference_full}), "
                f"lead {m.margin:.4f} (smaller than {1 - below:.1%} of all gaps), INT8 worst "
                f"case {m.int8_slack:.4f}"
            )
    post = [sum(x) for x in zip(*(r.post_norm_later for r in results), strict=True)]
    pre = [sum(x) for x in zip(*(r.pre_norm_later for r in results), strict=True)]
    sens = [sum(x) for x in zip(*(r.sensitive for r in results), strict=True)]
    print(
        f"chain rule: depth >= 2 agreement with a post-norm chain {_rate((post[0], post[1])):.1%}"
        f", with a pre-norm chain {_rate((pre[0], pre[1])):.1%}; the two rules differ in "
        f"{sens[0]}/{sens[1]} chains"
    )
    raw = next((r.raw_target_first for r in results if r.depth == 1), (0, 0))
    if raw[1]:
        print(
            f"target state: depth 1 agreement with a reference fed the target's pre-norm "
            f"state {_rate(raw):.1%}"
        )
    if sens[0] == 0:
        verdict = "this model cannot tell the chaining rules apart (no chain differs)"
    elif post[0] * pre[1] > pre[0] * post[1]:
        verdict = "the decoder chains on the post-norm MTP output (the checkpoint's rule)"
    else:
        verdict = "the decoder does NOT follow the post-norm chain: check core.decoding.decoder"
    print(f"verdict: {verdict}")


def check_smoke(all_results: dict[str, list[DepthResult]], depths: list[int]) -> int:
    from _smoke import SmokeCheck

    from qwen_mtp_desktop.devtools.mtp_chain_check import FP16_SLACK

    check = SmokeCheck("mtp_chain_check.py")
    exact = all_results.get("exact", [])
    check.require([r.depth for r in exact] == depths, f"depths {[r.depth for r in exact]}")
    for r in exact:
        check.require(len(r.agreement) == r.depth, f"depth {r.depth}: {r.agreement}")
        for position, (agreed, compared) in enumerate(r.agreement, start=1):
            check.require(compared > 0, f"depth {r.depth} position {position}: nothing compared")
            # The demo model under exact numerics: the decoder proposes what the reference does.
            check.require(
                compared > 0 and agreed / compared >= 0.9,
                f"depth {r.depth} position {position}: agreement {agreed}/{compared}",
            )
        check.fraction(f"depth {r.depth} acceptance", r.acceptance)
        check.require(
            r.target_agreed == r.target_compared > 0,
            f"depth {r.depth}: target agreement {r.target_agreed}/{r.target_compared}",
        )
        check.require(
            all(m.near_tie(FP16_SLACK) for m in r.mismatches),
            f"depth {r.depth}: a disagreement beyond numerics",
        )
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least, whole_numbers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="an exported model folder (with MTP head)")
    parser.add_argument("--checkpoint", type=Path, help="the checkpoint it was exported from")
    parser.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3,4")
    parser.add_argument("--prompts", default="demo", help="a prompt set (name or JSON file)")
    parser.add_argument("--max-new-tokens", type=at_least(2), default=64)
    parser.add_argument(
        "--numerics",
        default="exact,default",
        help="exact (f32, no dynamic quantization: compares like with like) and/or default "
        "(what the chat runs)",
    )
    parser.add_argument(
        "--stop-at-eos",
        action="store_true",
        help="end answers at the model's stop tokens (default: fixed-length answers)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the demo model, 2 prompts, depths 1-4, 24 tokens, exact numerics; checks that "
        "every draft matches the reference up to near-ties; exit 1 if not",
    )
    args = parser.parse_args(argv)
    from qwen_mtp_desktop.core.errors import UserFacingError

    if args.smoke:
        from qwen_mtp_desktop.core.files.paths import demo_model_dir

        args.model = args.model or demo_model_dir()
        args.checkpoint = args.checkpoint or args.model.parent / "checkpoint"
        args.numerics, args.max_new_tokens, args.stop_at_eos = "exact", 24, True
    if args.model is None or args.checkpoint is None:
        parser.error("give --model and --checkpoint (or --smoke)")
    if not (args.model / "openvino_mtp_model.xml").is_file():
        parser.error(f"{args.model} is not an exported model with an MTP head")
    if not (args.checkpoint / "config.json").is_file():
        parser.error(f"{args.checkpoint} is not a checkpoint folder (no config.json)")
    depths = args.depths
    numerics = [n.strip() for n in args.numerics.split(",")]
    if not numerics or any(n not in NUMERICS for n in numerics):
        parser.error(f"--numerics: choose from {', '.join(NUMERICS)}")

    from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set
    from qwen_mtp_desktop.devtools.mtp_chain_check import FP16_SLACK, DecoderUnderTest
    from qwen_mtp_desktop.devtools.mtp_reference import MtpReferenceError

    try:
        prompts = [p.messages[-1].content for p in load_prompt_set(args.prompts).prompts]
    except UserFacingError as exc:
        parser.error(exc.message)
    if args.smoke:
        prompts = prompts[:2]
    scale = embedding_scale(args.model)
    print(f"# MTP chain check: {args.model} against {args.checkpoint}")
    print(
        f"prompts {args.prompts} ({len(prompts)}), {args.max_new_tokens} new tokens, "
        f"embedding scale {scale:.4f}, machine load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    started = time.perf_counter()
    reference = None
    prepared_cache: dict[tuple[int, ...], Any] = {}
    all_results: dict[str, list[DepthResult]] = {}
    for mode in numerics:
        under_test = DecoderUnderTest(args.model, exact=mode == "exact")
        if reference is None:
            try:
                reference = under_test.reference(args.checkpoint, embedding_scale=scale)
            except MtpReferenceError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        results = []
        for d in depths:
            results.append(
                check_depth(
                    under_test,
                    reference,
                    prompts,
                    d,
                    args.max_new_tokens,
                    not args.stop_at_eos,
                    prepared_cache,
                )
            )
            elapsed = time.perf_counter() - started
            print(f"  {mode} numerics, depth {d} checked ({elapsed:.0f} s)", file=sys.stderr)
        all_results[mode] = results
        report(mode, results, FP16_SLACK)
        del under_test
    print(f"\ntook {time.perf_counter() - started:.0f} s")
    if args.smoke:
        return check_smoke(all_results, depths)
    return 0 if all(math.isfinite(r.acceptance) for rs in all_results.values() for r in rs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
