"""Shrinking a failing run to a short schedule that still fails the same way (delta debugging, Zeller's ddmin, as
property-based testing tools shrink a counterexample).

A failing ``Result`` is first pinned: its interleaving becomes the scenario's explicit ``choices``, so a replay
is exact. Then, as long as the same invariant (``Violation.kind``) still fails, the shrinker drops faults, drops
actors (with their faults), shortens pauses and actors' batch counts, and removes chunks of the interleaving
(halving the chunk size: a step whose actor is not runnable falls to the first runnable one). It stops after
``budget`` replays or ``seconds``; the shortest failing run found is returned.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from itertools import groupby

from blobstate.testing.simulation.runner import Result, Scenario, run


def shrink(result: Result, *, budget: int = 150, seconds: float = 120.0,
           runner: Callable[[Scenario], Result] = run) -> Result:
    """The shortest run found that fails like ``result`` (``result`` itself when nothing shorter fails)."""
    if result.violation is None:
        raise ValueError("only a failing run shrinks")
    kind = result.violation.kind
    best = result
    deadline = time.monotonic() + seconds
    tries = 0

    def attempt(candidate: Scenario) -> bool:
        nonlocal best, tries
        if tries >= budget or time.monotonic() > deadline:
            return False
        tries += 1
        got = runner(candidate)
        if got.violation is not None and got.violation.kind == kind and _size(got) < _size(best):
            got.scenario.choices = list(got.trace)
            best = got
            return True
        return False

    best.scenario = _pinned(best)
    progress = True
    while progress and tries < budget and time.monotonic() < deadline:
        progress = False
        for candidate in _simpler(best.scenario):
            if attempt(candidate):
                progress = True
                break
    return best


def _pinned(result: Result) -> Scenario:
    scenario = copy.deepcopy(result.scenario)
    scenario.choices = list(result.trace)
    return scenario


def _size(result: Result) -> tuple[int, int, int]:
    return (len(result.scenario.faults) + len(result.scenario.actors), result.steps, 0)


def _simpler(s: Scenario) -> Iterator[Scenario]:
    """Candidates one step simpler than ``s``, the coarsest first."""
    for i in range(len(s.faults)):
        c = copy.deepcopy(s)
        del c.faults[i]
        yield c
    for spec in s.actors:
        c = copy.deepcopy(s)
        c.actors = [a for a in c.actors if a.name != spec.name]
        c.faults = [f for f in c.faults if f.actor != spec.name]
        c.choices = [n for n in c.choices or [] if n != spec.name]
        yield c
    for i, f in enumerate(s.faults):
        if f.kind == "pause" and f.ms > 10:
            c = copy.deepcopy(s)
            c.faults[i].ms = f.ms // 2
            yield c
    for i, spec in enumerate(s.actors):
        for arg in ("batches", "runs"):
            if spec.args.get(arg, 0) > 1:
                c = copy.deepcopy(s)
                c.actors[i].args[arg] -= 1
                yield c
        if spec.start_ms:
            c = copy.deepcopy(s)
            c.actors[i].start_ms //= 2
            yield c
    choices = s.choices or []
    size = len(choices) // 2
    while size >= 4:
        for start in range(0, len(choices), size):
            c = copy.deepcopy(s)
            c.choices = choices[:start] + choices[start + size:]
            yield c
        size //= 2


def describe(result: Result) -> str:
    """A failing run as text: the violation, the scenario, the faults that fired, and the interleaving (runs of
    one actor as ``name×count``, each run ending where that actor stopped)."""
    s = result.scenario
    lines = [f"seed {s.seed}: {result.violation}" if result.violation else f"seed {s.seed}: ok",
             f"{result.steps} steps, {len(s.actors)} actors, {len(s.faults)} faults; found "
             + ("after the last step (final recovery, next commit, gc)" if result.phase == "final" else
                f"after step {result.steps} ({last_call(result)})")]
    lines += [f"  actor {a}" for a in s.actors]
    lines += [f"  fault {f}" for f in s.faults]
    lines += [f"  fired {f}" for f in result.fired]
    runs = []
    i = 0
    for name, group in groupby(result.trace):
        n = len(list(group))
        i += n
        runs.append(f"{name}×{n}→{result.labels[i - 1]}")
    lines.append("  schedule: " + " | ".join(runs))
    return "\n".join(lines)


def last_call(result: Result) -> str:
    """What the actor of the failing step did in it: the scheduling point it ran from (the call it then made)."""
    if result.phase == "final":
        return "final: recovery, next commit, gc"
    if not result.trace:
        return ""
    actor = result.trace[-1]
    earlier = [label for name, label in zip(result.trace[:-1], result.labels[:-1], strict=True) if name == actor]
    return f"{actor}: {earlier[-1] if earlier else 'start'}"


def classify(result: Result) -> str:
    """Which of issue 27's cases a violation is: ``case 1`` (a writer's retention pruned the chain: the failing step was
    a ``log prune``), ``case 2`` (a group record references a deleted part), ``case 11`` (the same, re-appended by
    recovery), ``case 10`` (a stale second writer's append broke the chain), ``case 3`` (a record of the second log lost
    its blobs), ``rescale`` (a rescale changed its source, or its copy is wrong, lost or unfinished), ``regroup`` (a
    rescale at restart lost or duplicated a key), ``standby`` (a promoted standby's copy lost or doubled a batch's
    writes, or a snapshot staged from it restores wrong: issue 42), issue 39's ``case 1`` (no key opens the marker) and
    ``case 2`` (a key a rotation reported lost to a racing rewrite of the marker), ``issue 39 case 3``, ``issue 39 case
    7`` (a group's lost parts, in a scenario whose executors' hosts lose their disks) and ``issue 39 case 12``, or
    ``other``."""
    v = result.violation
    if v is None:
        return "ok"
    if v.detail.startswith("issue 39 case"):  # ``heal_actors``' own checks name their case
        return v.detail.split(":")[0]
    if v.kind in ("source", "rescale") or "grp-rescaled" in v.detail:
        return "rescale"
    if v.kind == "regroup":
        return "regroup"  # a key-grouped store's rescale at restart lost or duplicated a key (issue 42)
    if v.kind == "standby" or "sim/group/stby" in v.detail:
        return "standby"  # a promoted standby's (or hand-over's) copy lost or doubled a batch's writes (issue 42)
    if (v.kind == "marker" and "unreadable" in v.detail) or (v.kind == "crash" and "repository marker" in v.detail
                                                             and "damaged" in v.detail):
        return "issue 39 case 1"  # the marker torn: no key opens it, or an actor read it so
    if v.kind in ("key", "marker"):
        return "issue 39 case 2"  # a key the operator holds lost to a racing rewrite of the marker
    if "log2" in result.scenario.logs and v.kind in ("lost", "orphan") and "sim/0/snap" in v.detail:
        return "case 3"
    if v.kind == "lost" and "sim/group/grp" in v.detail and "group of batch" in v.detail:
        if any(a.program == "host_loss" for a in result.scenario.actors):
            return "issue 39 case 7"  # the executors' copies may be gone too: the owner must void
        return "case 11" if last_call(result).startswith("rec:") else "case 2"
    if v.kind == "broken" and last_call(result).endswith("log prune"):
        return "case 1"
    if v.kind in ("broken", "wrong") and last_call(result).endswith("log append"):
        return "case 10"
    return "other"
