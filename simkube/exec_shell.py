"""What answers inside a simulated container: a small shell.

Interactive with a TTY (``sh``, ``bash``): a prompt, typed characters echoed as a terminal
does (backspace, Ctrl-C, Ctrl-D on an empty line, escape sequences dropped), each line run
on Enter, output lines ending ``\\r\\n``. Without a TTY it reads lines from stdin and
writes stdout and stderr apart. A command given whole (``echo hi``, ``sh -c "exit 3"``)
runs once. Builtins: echo (with ``$NAME`` and ``$?``), ls, cat of a few files, env,
hostname, pwd, stty size (the terminal's size, as resized), true, false, exit N; anything
else is ``not found``, status 127.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

PROMPT = "/ # "
SHELLS = {"sh", "/bin/sh", "bash", "/bin/bash", "ash", "/bin/ash"}
_VAR = re.compile(r"\$(\?|[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


class NotFound(Exception):
    """The command given to exec is not in the container (the runtime's error)."""


@dataclass
class Exited:
    code: int


@dataclass
class Shell:
    hostname: str
    env: dict[str, str]
    write: Callable[[int, bytes], None]  # (channel 1 or 2, bytes)
    tty: bool
    cols: int = 80
    rows: int = 24
    status: int = 0
    _line: list[str] = field(default_factory=list)
    _escape: str = ""
    _pending: list[tuple[int, bytearray]] = field(default_factory=list)

    # --- the file system --------------------------------------------------------------

    def files(self) -> dict[str, str]:
        return {"/etc/hostname": self.hostname + "\n",
                "/etc/os-release": 'NAME="simkube"\nID=simkube\nVERSION_ID=1.37\n',
                "/etc/hosts": f"127.0.0.1\tlocalhost\n10.244.0.10\t{self.hostname}\n",
                "/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"}

    def dirs(self) -> dict[str, list[str]]:
        return {"/": ["bin", "etc", "home", "proc", "root", "tmp", "usr", "var"],
                "/etc": ["hostname", "hosts", "os-release", "passwd"],
                "/bin": ["cat", "echo", "env", "hostname", "ls", "sh"],
                "/home": [], "/root": [], "/tmp": [], "/usr": ["bin", "lib"],
                "/var": ["log"], "/proc": []}

    # --- output -------------------------------------------------------------------------

    def out(self, text: str) -> None:
        self._emit(1, text)

    def err(self, text: str) -> None:
        # With a TTY there is one stream, as a terminal shows it.
        self._emit(1 if self.tty else 2, text)

    def _emit(self, channel: int, text: str) -> None:
        if self.tty:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        if text:
            self._put(channel, text.encode())

    def _put(self, channel: int, data: bytes) -> None:
        # Kept until flush(): what one keystroke or command writes leaves as one message.
        if self._pending and self._pending[-1][0] == channel:
            self._pending[-1][1].extend(data)
        else:
            self._pending.append((channel, bytearray(data)))

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for channel, data in pending:
            self.write(channel, bytes(data))

    def prompt(self) -> None:
        if self.tty:
            self.out(PROMPT)

    # --- input --------------------------------------------------------------------------

    def feed(self, data: bytes) -> Exited | None:
        """Typed bytes (stdin); Exited once the shell exits."""
        text = data.decode(errors="replace")
        if not self.tty:
            return self._lines(text)
        for char in text:
            if self._escape:
                self._escape += char
                if len(self._escape) > 1 and (char.isalpha() or char == "~"):
                    self._escape = ""
                continue
            if char == "\x1b":
                self._escape = char
            elif char in "\r\n":
                self.out("\n")
                line, self._line = "".join(self._line), []
                done = self.run_line(line)
                if done is not None:
                    return done
                self.prompt()
            elif char in "\x7f\x08":
                if self._line:
                    self._line.pop()
                    self._put(1, b"\b \b")
            elif char == "\x03":
                self._line = []
                self.out("^C\n")
                self.status = 130
                self.prompt()
            elif char == "\x04":
                if not self._line:
                    self.out("exit\n")
                    return Exited(self.status)
            elif char >= " " or char == "\t":
                self._line.append(char)
                self._put(1, char.encode())
        return None

    def _lines(self, text: str) -> Exited | None:
        self._line.append(text)
        buffered = "".join(self._line)
        *complete, rest = buffered.split("\n")
        self._line = [rest] if rest else []
        for line in complete:
            done = self.run_line(line)
            if done is not None:
                return done
        return None

    def end_of_input(self) -> Exited:
        """stdin closed (v5's close of channel 0): the shell exits with the last status."""
        return Exited(self.status)

    # --- commands -----------------------------------------------------------------------

    def run_line(self, line: str) -> Exited | None:
        line = _VAR.sub(self._expand, line)
        try:
            argv = shlex.split(line)
        except ValueError:
            self.err("sh: syntax error: unterminated quoted string\n")
            self.status = 2
            return None
        if not argv:
            return None
        return self.run(argv)

    def _expand(self, match: re.Match[str]) -> str:
        name = match.group(1).strip("{}")
        return str(self.status) if name == "?" else self.env.get(name, "")

    def run(self, argv: list[str]) -> Exited | None:
        name, args = argv[0], argv[1:]
        if name == "exit":
            try:
                return Exited(int(args[0]) & 0xFF if args else self.status)
            except ValueError:
                self.err(f"sh: exit: Illegal number: {args[0]}\n")
                return Exited(2)
        if name in SHELLS:
            if len(args) >= 2 and args[0] == "-c":
                return self.run_line(args[1])
            self.err(f"{name}: only `{name} -c COMMAND` runs nested here\n")
            self.status = 2
            return None
        command = getattr(self, "_cmd_" + name.rsplit("/", 1)[-1], None)
        if command is None or name.startswith("_"):
            self.err(f"sh: {name}: not found\n")
            self.status = 127
            return None
        self.status = int(command(args))
        return None

    def _cmd_echo(self, args: list[str]) -> int:
        self.out(" ".join(args) + "\n")
        return 0

    def _cmd_true(self, args: list[str]) -> int:
        return 0

    def _cmd_false(self, args: list[str]) -> int:
        return 1

    def _cmd_pwd(self, args: list[str]) -> int:
        self.out("/\n")
        return 0

    def _cmd_hostname(self, args: list[str]) -> int:
        self.out(self.hostname + "\n")
        return 0

    def _cmd_env(self, args: list[str]) -> int:
        self.out("".join(f"{k}={v}\n" for k, v in self.env.items()))
        return 0

    def _cmd_ls(self, args: list[str]) -> int:
        status = 0
        for path in [a for a in args if not a.startswith("-")] or ["/"]:
            full = "/" + path.strip("/") if path != "/" else "/"
            dirs, files = self.dirs(), self.files()
            if full in dirs:
                if dirs[full]:
                    self.out("\n".join(dirs[full]) + "\n")
            elif full in files:
                self.out(path + "\n")
            else:
                self.err(f"ls: {path}: No such file or directory\n")
                status = 1
        return status

    def _cmd_cat(self, args: list[str]) -> int:
        status = 0
        for path in args:
            files = self.files()
            if path in files:
                self.out(files[path])
            elif path in self.dirs():
                self.err("cat: read error: Is a directory\n")
                status = 1
            else:
                self.err(f"cat: can't open '{path}': No such file or directory\n")
                status = 1
        return status

    def _cmd_stty(self, args: list[str]) -> int:
        if args == ["size"] and self.tty:
            self.out(f"{self.rows} {self.cols}\n")
            return 0
        self.err("stty: standard input: Not a tty\n" if not self.tty else
                 "stty: only `stty size` is known here\n")
        return 1


def start(shell: Shell, command: list[str]) -> Exited | None:
    """Begin `command` in the container: an interactive shell prompts and returns None (it
    then reads stdin); anything else runs to its end (Exited). NotFound when the container
    has no such program."""
    name = command[0]
    if name in SHELLS and len(command) == 1:
        shell.prompt()
        return None
    known = name in SHELLS or hasattr(shell, "_cmd_" + name.rsplit("/", 1)[-1]) \
        or name == "exit"
    if not known:
        raise NotFound(name)
    done = shell.run(command)
    return done if done is not None else Exited(shell.status)
