"""A seeded generator of small Python function tasks, and their held-out split.

Every task is a function whose docstring states a short pipeline of operations
in a regular phrasing, one phrase per line of the body:

    def keep_gt_then_square(xs: list[int]) -> list[int]:
        \"\"\"Keep the numbers greater than 3, then square each number. Return the list.\"\"\"
        result = list(xs)
        result = [x for x in result if x > 3]
        result = [x * x for x in result]
        return result

Four families: integer arithmetic (with conditionals), list pipelines, string
pipelines and counting/summing loops. A task's *combination* is its family plus
the sequence of operation kinds (constants excluded). A fixed hash of the
combination puts about one in eight combinations of two or more operations into
the held-out split: training never sees those combinations, only their parts.

Tasks are written in HumanEval format: `task_id, prompt, entry_point, test,
canonical_solution`, where `test` defines `check(candidate)` with asserts whose
expected values come from running the canonical solution.

See docs/ddtree.md "Train".
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ddtune.errors import UserError
from ddtune.jsonl import jsonl_rows

HOLDOUT_PERCENT = 12  # share of eligible combinations reserved for the held-out split
INDENT = "    "


@dataclass(frozen=True)
class Op:
    """One operation: a phrase for the docstring and a line for the body.

    `{k}` in both is replaced by a constant drawn from `consts`; `{v}` is the
    variable the family threads through the body.
    """

    kind: str
    phrase: str
    code: str
    consts: tuple = ()


INT_OPS = [
    Op("add", "add {k}", "{v} = {v} + {k}", (1, 2, 3, 4, 5, 6, 7, 8, 9)),
    Op("sub", "subtract {k}", "{v} = {v} - {k}", (1, 2, 3, 4, 5, 6, 7, 8, 9)),
    Op("mul", "multiply by {k}", "{v} = {v} * {k}", (2, 3, 4, 5)),
    Op("div", "divide by {k} rounding down", "{v} = {v} // {k}", (2, 3, 4, 5)),
    Op("mod", "take the remainder modulo {k}", "{v} = {v} % {k}", (3, 5, 7, 10)),
    Op("sq", "square it", "{v} = {v} * {v}"),
    Op("neg", "negate it", "{v} = -{v}"),
    Op("abs", "take the absolute value", "{v} = abs({v})"),
    Op("cap", "cap it at {k}", "{v} = min({v}, {k})", (5, 10, 20, 50)),
    Op("floor", "raise it to at least {k}", "{v} = max({v}, {k})", (0, 1, 5, 10)),
    Op("halve_even", "if it is even, halve it", "if {v} % 2 == 0:\n    {v} = {v} // 2"),
    Op("add_odd", "if it is odd, add {k}", "if {v} % 2 == 1:\n    {v} = {v} + {k}", (1, 3, 5)),
    Op(
        "sub_big",
        "if it is greater than {k}, subtract {k}",
        "if {v} > {k}:\n    {v} = {v} - {k}",
        (5, 10, 20),
    ),
]

LIST_OPS = [
    Op("even", "keep the even numbers", "{v} = [x for x in {v} if x % 2 == 0]"),
    Op("odd", "keep the odd numbers", "{v} = [x for x in {v} if x % 2 == 1]"),
    Op("pos", "keep the positive numbers", "{v} = [x for x in {v} if x > 0]"),
    Op(
        "gt", "keep the numbers greater than {k}", "{v} = [x for x in {v} if x > {k}]", (0, 2, 3, 5)
    ),
    Op("lt", "keep the numbers less than {k}", "{v} = [x for x in {v} if x < {k}]", (3, 5, 8)),
    Op("nomult", "drop the multiples of {k}", "{v} = [x for x in {v} if x % {k} != 0]", (2, 3, 5)),
    Op("addk", "add {k} to each number", "{v} = [x + {k} for x in {v}]", (1, 2, 3, 5, 10)),
    Op("mulk", "multiply each number by {k}", "{v} = [x * {k} for x in {v}]", (2, 3, 4)),
    Op("sqr", "square each number", "{v} = [x * x for x in {v}]"),
    Op("negl", "negate each number", "{v} = [-x for x in {v}]"),
    Op("absl", "take the absolute value of each number", "{v} = [abs(x) for x in {v}]"),
    Op("sort", "sort them in ascending order", "{v} = sorted({v})"),
    Op("rsort", "sort them in descending order", "{v} = sorted({v}, reverse=True)"),
    Op("rev", "reverse the order", "{v} = {v}[::-1]"),
    Op("head", "keep the first {k} numbers", "{v} = {v}[:{k}]", (2, 3, 4)),
    Op("tail", "drop the first {k} numbers", "{v} = {v}[{k}:]", (1, 2, 3)),
    Op("uniq", "remove duplicates keeping the first occurrence", "{v} = list(dict.fromkeys({v}))"),
]

STR_OPS = [
    Op("upper", "convert it to upper case", "{v} = {v}.upper()"),
    Op("lower", "convert it to lower case", "{v} = {v}.lower()"),
    Op("strip", "strip surrounding whitespace", "{v} = {v}.strip()"),
    Op("srev", "reverse it", "{v} = {v}[::-1]"),
    Op(
        "repl",
        "replace every '{k[0]}' with '{k[1]}'",
        "{v} = {v}.replace('{k[0]}', '{k[1]}')",
        (("a", "o"), ("e", "i"), ("o", "0"), (" ", "_"), ("l", "1")),
    ),
    Op("suffix", "append '{k}'", "{v} = {v} + '{k}'", ("!", "?", "ing", "ed", "_x")),
    Op("prefix", "prepend '{k}'", "{v} = '{k}' + {v}", ("re", "un", ">", "pre_")),
    Op("first", "keep the first {k} characters", "{v} = {v}[:{k}]", (2, 3, 4, 5)),
    Op("drop", "drop the first {k} characters", "{v} = {v}[{k}:]", (1, 2, 3)),
    Op("nospace", "remove the spaces", "{v} = {v}.replace(' ', '')"),
    Op("twice", "repeat it twice", "{v} = {v} * 2"),
    Op("swap", "swap the case of every letter", "{v} = {v}.swapcase()"),
]

# Loop family: a condition, a transform and an accumulator, each a kind.
LOOP_CONDS = [
    Op("all", "every number", "True"),
    Op("even", "the even numbers", "x % 2 == 0"),
    Op("odd", "the odd numbers", "x % 2 == 1"),
    Op("pos", "the positive numbers", "x > 0"),
    Op("gt", "the numbers greater than {k}", "x > {k}", (1, 3, 5)),
    Op("lt", "the numbers less than {k}", "x < {k}", (2, 4, 6)),
    Op("mult", "the multiples of {k}", "x % {k} == 0", (3, 4, 5)),
]
LOOP_TERMS = [
    Op("id", "", "x"),
    Op("sq", "the squares of ", "x * x"),
    Op("dbl", "twice ", "2 * x"),
    Op("plus", "{k} more than ", "x + {k}", (1, 2, 10)),
]
LOOP_ACCS = ["sum", "count", "max"]

FAMILIES = ("int", "list", "str", "loop")


@dataclass
class Task:
    """One HumanEval-format task plus the combination it was built from."""

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str
    combo: str

    def text(self) -> str:
        """Prompt followed by the reference body: what the training corpus sees."""
        return self.prompt + self.canonical_solution

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def combo_key(family: str, kinds: tuple[str, ...]) -> str:
    return family + ":" + "+".join(kinds)


def is_heldout(key: str) -> bool:
    """Combinations of two or more operations whose hash falls in the reserved bucket."""
    if key.count("+") < 1:
        return False
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100
    return bucket < HOLDOUT_PERCENT


def _fill(template: str, k: object, v: str) -> str:
    return template.format(k=k, v=v)


def _pick_ops(rng: random.Random, ops: list[Op], n: int) -> list[tuple[Op, object]]:
    chosen = []
    for op in rng.sample(ops, n):
        chosen.append((op, rng.choice(op.consts) if op.consts else None))
    return chosen


def _body_lines(steps: list[tuple[Op, object]], v: str) -> list[str]:
    lines = []
    for op, k in steps:
        lines.extend(_fill(op.code, k, v).split("\n"))
    return lines


def _sentence(phrases: list[str], ending: str) -> str:
    text = ", then ".join(phrases)
    return text[0].upper() + text[1:] + ". " + ending


def _build_pipeline(rng: random.Random, family: str) -> tuple[str, str, str, list[str], tuple]:
    """(name, signature, docstring, body lines, kinds) for the int/list/str families."""
    n = rng.choice((1, 2, 2, 3, 3))
    if family == "int":
        steps = _pick_ops(rng, INT_OPS, n)
        head: list[str] = []
        sig, ret = "(x: int) -> int", "Return the result."
        body = _body_lines(steps, "x") + ["return x"]
    elif family == "str":
        steps = _pick_ops(rng, STR_OPS, n)
        final = rng.choice(("str", "str", "len"))
        ret = "Return the string." if final == "str" else "Return its length."
        sig = "(s: str) -> str" if final == "str" else "(s: str) -> int"
        body = _body_lines(steps, "s") + ["return s" if final == "str" else "return len(s)"]
        head = []
    else:
        steps = _pick_ops(rng, LIST_OPS, n)
        final = rng.choice(("list", "list", "sum", "len", "max"))
        ret, out, rtype = _list_final(final)
        sig = f"(xs: list[int]) -> {rtype}"
        head = ["result = list(xs)"]
        body = head + _body_lines(steps, "result") + [out]
        head = [final]
    kinds = tuple(op.kind for op, _ in steps) + tuple(head)
    phrases = [_fill(op.phrase, k, "") for op, k in steps]
    name = family + "_" + "_".join(kinds)
    if family == "int":
        phrases[0] = "take x, " + phrases[0]
    elif family == "str":
        phrases[0] = "take s, " + phrases[0]
    else:
        phrases[0] = "take xs, " + phrases[0]
    return name, sig, _sentence(phrases, ret), body, kinds


def _list_final(final: str) -> tuple[str, str, str]:
    """(docstring ending, return line, return type) for a list pipeline."""
    return {
        "list": ("Return the list.", "return result", "list[int]"),
        "sum": ("Return their sum.", "return sum(result)", "int"),
        "len": ("Return how many numbers are left.", "return len(result)", "int"),
        "max": (
            "Return the largest, or 0 if none are left.",
            "return max(result, default=0)",
            "int",
        ),
    }[final]


def _build_loop(rng: random.Random) -> tuple[str, str, str, list[str], tuple]:
    """(name, signature, docstring, body lines, kinds) for the loop family."""
    cond, term, acc = rng.choice(LOOP_CONDS), rng.choice(LOOP_TERMS), rng.choice(LOOP_ACCS)
    if acc == "count":
        term = LOOP_TERMS[0]
    ck = rng.choice(cond.consts) if cond.consts else None
    tk = rng.choice(term.consts) if term.consts else None
    what, value = _fill(term.phrase, tk, "") + _fill(cond.phrase, ck, ""), _fill(term.code, tk, "")
    update, doc = {
        "count": ("total += 1", f"Count {what} in xs, using a loop. Return the count."),
        "sum": (f"total += {value}", f"Add up {what} in xs, using a loop. Return the total."),
        "max": (
            f"total = max(total, {value})",
            f"Find the largest of {what} in xs, starting from 0, using a loop. Return it.",
        ),
    }[acc]
    body = ["total = 0", "for x in xs:"]
    if cond.kind == "all":
        body.append(f"    {update}")
    else:
        body += [f"    if {_fill(cond.code, ck, '')}:", f"        {update}"]
    body.append("return total")
    name = f"loop_{acc}_{term.kind}_{cond.kind}"
    return name, "(xs: list[int]) -> int", doc, body, (acc, term.kind, cond.kind)


def _random_input(rng: random.Random, family: str) -> object:
    if family == "int":
        return rng.randint(-30, 60)
    if family == "str":
        words = ["hello", "data", "apple", "Level", "code", "tree", "Zone", "go", "loop", "A b"]
        text = " ".join(rng.sample(words, rng.randint(1, 3)))
        return rng.choice(["", " ", "  "]) + text + rng.choice(["", " "])
    return [rng.randint(-9, 12) for _ in range(rng.randint(0, 8))]


def _make_test(rng: random.Random, family: str, source: str, name: str) -> str | None:
    """`def check(candidate)` with 5 asserts; None when the inputs don't discriminate."""
    namespace: dict = {}
    exec(source, namespace)  # our own generated code, no user input
    func = namespace[name]
    cases, outputs = [], set()
    for _ in range(5):
        arg = _random_input(rng, family)
        expected = func(arg.copy() if isinstance(arg, list) else arg)
        cases.append(f"{INDENT}assert candidate({arg!r}) == {expected!r}")
        outputs.add(repr(expected))
    if len(outputs) < 2:
        return None  # a constant function would pass without doing the work
    return "\n\ndef check(candidate):\n" + "\n".join(cases) + "\n"


def make_task(rng: random.Random, family: str, index: int) -> Task | None:
    """One random task of `family`; None if its tests would be degenerate."""
    if family == "loop":
        name, sig, doc, body, kinds = _build_loop(rng)
    else:
        name, sig, doc, body, kinds = _build_pipeline(rng, family)
    prompt = f'def {name}{sig}:\n{INDENT}"""{doc}"""\n'
    solution = "".join(f"{INDENT}{line}\n" for line in body)
    test = _make_test(rng, "list" if family == "loop" else family, prompt + solution, name)
    if test is None:
        return None
    key = combo_key(family, kinds)
    return Task(f"ddtune/{index}", prompt, name, test, solution, key)


def iter_tasks(seed: int, split: str) -> Iterator[Task]:
    """Endless stream of tasks of one split ("train" or "heldout"), deterministic in `seed`."""
    if split not in ("train", "heldout"):
        raise UserError(f"split must be 'train' or 'heldout'; got {split!r}")
    rng = random.Random(seed)
    index = 0
    while True:
        family = rng.choice(FAMILIES)
        task = make_task(rng, family, index)
        if task is None or is_heldout(task.combo) != (split == "heldout"):
            continue
        index += 1
        yield task


def heldout_tasks(count: int, seed: int) -> list[Task]:
    """`count` held-out tasks with distinct prompts, families interleaved."""
    tasks: list[Task] = []
    seen: set[str] = set()
    for task in iter_tasks(seed, "heldout"):
        if task.prompt in seen:
            continue
        seen.add(task.prompt)
        task.task_id = f"ddtune/{len(tasks)}"
        tasks.append(task)
        if len(tasks) == count:
            return tasks
    raise AssertionError("unreachable: iter_tasks is endless")


def write_jsonl(tasks: list[Task], path: Path) -> None:
    """HumanEval-format JSONL (plus the `combo` field, which HumanEval readers ignore)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for task in tasks:
            f.write(task.to_json() + "\n")


def read_jsonl(path: Path) -> list[dict]:
    """Tasks from a HumanEval-format JSONL; a clear error for a malformed line."""
    required = ("task_id", "prompt", "entry_point", "test")
    rows = []
    for number, row in jsonl_rows(path):
        missing = [key for key in required if key not in row]
        if missing:
            raise UserError(f"{path}:{number}: missing field(s) {', '.join(missing)}")
        rows.append(row)
    return rows
