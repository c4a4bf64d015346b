"""Create ``.venv`` and install the locked dependencies into it, with uv where it can be had.

Run by ``make`` (the ``.venv/.installed`` target) with the system Python, before anything of
this repository is importable, so it uses the standard library only. Two ways, the first that
works:

* **uv**: fetched with the system pip (``pip install --target .venv/uv uv==UV_VERSION``, from
  the package indexes pip is configured with), then told those same indexes
  (``uv_source_args``: ``index-url``, ``extra-index-url``, ``find-links`` and ``cert`` of
  ``pip config list``, environment variables included) and pip's way of choosing among them
  (every index at once: ``--index-strategy unsafe-best-match``). On the 2-core machine the
  whole way took 12.6 s (uv fetched 2.0, the locks 9.8) where pip's took 32.5-40 s (its locks
  23.6-31.4): uv unpacks wheels on every core.
* **pip**, where uv cannot be fetched or fails: ``python -m venv`` with its own pip, upgraded,
  and the locks installed by three pip processes at once (pip unpacks on one core).

Both install exactly the locks' pins with ``--no-deps`` (the lock pins every requirement of its
pins: ``tests/test_locks.py``), the latest pip (the virtual environment's own, as ``python -m
venv`` and an upgrade would give) and this repository in editable mode. What it does not do:
compile byte code (the Makefile runs ``compileall`` on both cores afterwards) or decide when to
run (the Makefile's stamp file does).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

UV_VERSION = "0.13.10"
LOCKS = ("requirements.lock", "requirements-nodeps.lock")
OPTIONS = ("index-url", "extra-index-url", "find-links", "cert")


def say(message: str) -> None:
    print(f"install: {message}", flush=True)


def pip_config(python: str) -> dict[str, str]:
    """pip's effective ``OPTIONS`` (``pip config list``: files first, the environment last, so a
    later line wins, as it does for pip)."""
    done = subprocess.run(
        [python, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if sep and name in OPTIONS:
            found[name] = value.strip().strip("'\"")
    return found


def uv_source_args(config: dict[str, str]) -> list[str]:
    """uv's arguments for the indexes and links of pip's configuration ``config``."""
    args = ["--index-strategy", "unsafe-best-match"]
    if config.get("index-url"):
        args += ["--index-url", config["index-url"]]
    for url in config.get("extra-index-url", "").split():
        args += ["--extra-index-url", url]
    for link in config.get("find-links", "").split():
        args += ["--find-links", link]
    return args


def run(label: str, command: list[str], *, env: dict[str, str] | None = None) -> bool:
    """Run ``command``; say what it was (``label``), its exit status and its time."""
    started = time.monotonic()
    done = subprocess.run(command, env=env, check=False)
    say(f"{label}: exit {done.returncode} in {time.monotonic() - started:.1f} s")
    return done.returncode == 0


def with_uv(venv: Path) -> bool:
    """Install with uv; False (nothing assumed about ``venv``'s packages) where it cannot."""
    tool = venv / "uv"
    fetch = [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check"]
    fetch += ["--root-user-action=ignore"]
    if not run(f"fetch uv {UV_VERSION}", [*fetch, "--target", str(tool), f"uv=={UV_VERSION}"]):
        say(f"uv {UV_VERSION} could not be fetched with pip; pip installs instead")
        return False
    uv = str(tool / "bin" / "uv")
    config = pip_config(sys.executable)
    env = dict(os.environ)
    if config.get("cert"):
        env["SSL_CERT_FILE"] = config["cert"]
    # this Python's own venv module: the same interpreter and layout as pip's way
    create = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
    if not (venv / "bin" / "python").exists() and not run("venv", create):
        return False
    python = str(venv / "bin" / "python")
    install = [uv, "pip", "install", "--quiet", "--python", python, "--no-deps"]
    locks = [arg for lock in LOCKS for arg in ("-r", lock)]
    if not run(
        "uv: the locks and pip", [*install, *uv_source_args(config), *locks, "pip"], env=env
    ):
        say("uv could not install the locks; pip installs instead")
        return False
    return run(
        "uv: this repository, editable", [*install, "--no-build-isolation", "-e", "."], env=env
    )


def with_pip(venv: Path) -> bool:
    """Install with pip: three processes at once (the lock in two halves, the model parts)."""
    if not run("venv", [sys.executable, "-m", "venv", str(venv)]):
        return False
    pip = [str(venv / "bin" / "pip"), "install", "--quiet"]
    if not run("pip: upgrade pip", [*pip, "--upgrade", "pip"]):
        return False
    lines = Path(LOCKS[0]).read_text(encoding="utf-8").splitlines(keepends=True)
    halves = [venv / "lock-half-1.txt", venv / "lock-half-2.txt"]
    for parity, half in enumerate(halves):
        half.write_text("".join(lines[parity::2]), encoding="utf-8")
    lists = [LOCKS[1], *map(str, halves)]
    started = time.monotonic()
    processes = [
        subprocess.Popen([*pip, "--no-compile", "--no-deps", "-r", name]) for name in lists
    ]
    codes = [process.wait() for process in processes]  # each waited for, whichever fails
    say(f"pip: the locks, exits {codes} in {time.monotonic() - started:.1f} s")
    if any(codes):
        return False
    return run(
        "pip: this repository, editable", [*pip, "--no-deps", "--no-build-isolation", "-e", "."]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venv", type=Path, help="the virtual environment's folder (.venv)")
    parser.add_argument("--pip", action="store_true", help="install with pip only")
    args = parser.parse_args(argv)
    if not args.pip and with_uv(args.venv):
        return 0
    return 0 if with_pip(args.venv) else 1


if __name__ == "__main__":
    sys.exit(main())
