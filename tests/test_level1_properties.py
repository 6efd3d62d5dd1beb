"""Property tests for Level 1: random mixtures of benign tool output (installs, progress, test
and build lines with random numbers) and embedded error lines and tracebacks.

The invariants are those of the golden tests (``check_invariants``): protected spans survive
verbatim, placeholders expand to exactly the lines they replaced, a second compaction changes
nothing, the output is never longer in tokens. On top of that, error output is never touched:
every injected error line and every traceback line is still in the output, in order.

Profiles ("ci" / "dev") are registered in conftest.py.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

from compactor.pipeline import Compactor  # noqa: E402

from test_level1_golden import check_invariants  # noqa: E402  (tests/ is on sys.path: rootdir conftest)

_C = Compactor()

NAMES = st.sampled_from(["requests", "numpy", "left-pad", "serde", "tokio", "lodash", "react", "urllib3", "ledger", "tinyc"])
NUM = st.integers(min_value=0, max_value=99_999)
PCT = st.integers(min_value=0, max_value=100)
VER = st.tuples(st.integers(0, 20), st.integers(0, 40), st.integers(0, 200)).map(lambda v: "%d.%d.%d" % v)
WORDS = st.lists(st.sampled_from(["alpha", "beta", "cache", "warm", "route", "build", "chunk", "queue", "index", "page"]),
                 min_size=1, max_size=6).map(" ".join)

BENIGN = st.one_of(
    st.builds(lambda n, v, k: f"Collecting {n}=={v}\n  Downloading {n}-{v}-py3-none-any.whl ({k} kB)", NAMES, VER, NUM),
    st.builds(lambda n, v: f"npm WARN deprecated {n}@{v}: this version is no longer maintained", NAMES, VER),
    st.builds(lambda a, b, s: f"added {a} packages, and audited {b} packages in {s}s", NUM, NUM, st.integers(1, 99)),
    st.builds(lambda p, n: f"[{p:3d}%] Building C object CMakeFiles/core.dir/src/{n}.c.o", PCT, NAMES),
    st.builds(lambda n, v: f"   Compiling {n} v{v}", NAMES, VER),
    st.builds(lambda n, p: f"tests/test_{n}.py::test_case_{p} PASSED".ljust(73) + f"[{p:3d}%]", NAMES, PCT),
    st.builds(lambda n, v, k: f"Downloaded from central: https://repo.maven.apache.org/maven2/org/{n}/{v}/{n}-{v}.jar ({k} kB at 812 kB/s)",
              NAMES, VER, NUM),
    st.builds(lambda a, b: f"Receiving objects: {a:3d}% ({b}/99999)", PCT, NUM),
    st.builds(lambda w, k: f"{w} {k}", WORDS, NUM),
    st.just(""),
)

ERROR_LINES = st.one_of(
    st.builds(lambda n: f"npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/{n}", NAMES),
    st.builds(lambda n, k: f"src/{n}.c:{k}:5: error: expected ';' before '}}' token", NAMES, NUM),
    st.builds(lambda n: f"error: could not compile `{n}` (lib) due to 2 previous errors", NAMES),
    st.builds(lambda n: f"ERROR: Could not find a version that satisfies the requirement {n}==0.0.0", NAMES),
    st.builds(lambda n: f"fatal: repository 'https://example.com/{n}.git/' not found", NAMES),
    st.builds(lambda n, k: f"FAILED tests/test_{n}.py::test_case_{k} - AssertionError: assert {k} == 0", NAMES, NUM),
)


@st.composite
def tracebacks(draw):
    depth = draw(st.integers(min_value=1, max_value=60))  # long ones (> 80 lines) exercise trace elision
    lines = ["Traceback (most recent call last):"]
    frozen = draw(st.booleans())  # import machinery frames: no file:line, no code line -> elided
    for d in range(depth):
        mod = draw(NAMES)
        lines.append(f'  File "/srv/app/{mod}/core.py", line {draw(NUM) + 1}, in step_{d}')
        lines.append(f"    return step_{d + 1}(ctx, {draw(NUM)})")
        if frozen:
            for k in range(draw(st.integers(min_value=0, max_value=4))):
                lines.append(f'  File "<frozen importlib._bootstrap>", line {1000 + k}, in _call_with_frames_removed')
    lines.append(f"ValueError: bad value {draw(NUM)} for {draw(NAMES)}")
    return "\n".join(lines)


@st.composite
def outputs(draw):
    """(command, text, error blocks) — benign runs with error blocks in between."""
    parts: list[str] = []
    errors: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        run = draw(st.lists(BENIGN, min_size=0, max_size=40))
        parts.extend(run)
        if draw(st.booleans()):
            err = draw(st.one_of(ERROR_LINES, tracebacks()))
            parts.append(err)
            errors.append(err)
    command = draw(st.sampled_from([None, "npm install", "pip install -r requirements.txt", "python -m pytest -v",
                                    "cargo build", "make -j4", "mvn -B package", "git clone https://example.com/x.git",
                                    "python run.py", "./build.sh"]))
    text = "\n".join(parts)
    if draw(st.booleans()):
        text += "\n"
    return command, text, errors


def _in_order(haystack: str, needles: list[str]) -> bool:
    pos = 0
    for n in needles:
        i = haystack.find(n, pos)
        if i < 0:
            return False
        pos = i + len(n)
    return True


@given(outputs())
def test_level1_invariants_on_mixed_output(case):
    command, text, errors = case
    out = _C.level1.collapse(text, role="tool", command=command)
    check_invariants(_C, text, command, out)


@given(outputs())
def test_error_output_is_never_touched(case):
    command, text, errors = case
    out = _C.level1.collapse(text, role="tool", command=command)
    kept: list[str] = []
    for err in errors:
        lines = err.split("\n")
        if lines[0].startswith("Traceback") and len(lines) > _C.config.long_trace_lines:
            # long traces: header, every frame line and the exception line survive (the middle
            # may be elided behind a reference)
            kept.extend(ln for ln in lines if ln.startswith("Traceback") or ln.startswith('  File "/srv/') or
                        ln.startswith("ValueError"))
        else:
            kept.extend(lines)
    assert _in_order(out.text, kept), "an error line was collapsed"


@given(st.lists(BENIGN, min_size=0, max_size=80).map("\n".join),
       st.sampled_from([None, "npm install", "python -m pytest", "make", "cat notes.txt"]))
def test_benign_output_invariants(text, command):
    out = _C.level1.collapse(text, role="tool", command=command)
    check_invariants(_C, text, command, out)


ADVERSARIAL = {
    "letters": "a" * 200_000,
    "at-signs": "@" * 200_000,
    "slashes": "/" * 200_000,
    "digits": "1" * 200_000,
    "colons": "a:1:" * 50_000,
    "tabs": "1\t" * 100_000,
    "spaces": "a " * 100_000,
    "quotes": "'" * 100_000 + " saved [1]",
    "brackets": "[ 1%] " * 30_000,
    "perms": "-rw-r--r-- " * 20_000,
    "path-lines": "\n".join(["./a/b.py"] * 20_000),
    "numbered-lines": "\n".join(f"{i}\tx" for i in range(20_000)),
    "grep-lines": "\n".join(f"src/a{i}.py:{i}:x" for i in range(20_000)),
    "install-names": "Successfully installed " + " ".join(f"p{i}-1.0" for i in range(30_000)),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_classifier_rules_are_bounded_on_adversarial_text(name):
    """Every classify rule (match + captures) stays fast on long, repetitive lines: no rule may
    backtrack polynomially (DESIGN §8)."""
    import time

    from compactor.engine.classify import _CompiledClassifier

    line = ADVERSARIAL[name]
    text = line if "\n" in line else "\n".join(["x", line, "y", line])
    lines = text.split("\n")
    for rule in _C.ruleset.stage("classify"):
        c = _CompiledClassifier(rule)
        for command in (None, "cat x"):
            t0 = time.process_time()
            c.matches(text, lines, command)
            c.render(c.fields(text, lines, command, None))
            spent = time.process_time() - t0
            assert spent < 1.5, f"{rule.id} took {spent:.2f}s on {name}"
