"""The test suite's Python fork server: one `import torch` per lit run, not one per `%python`.

lit starts this script with the project's Python (test/lit.cfg.py) and puts a client named
`python` first in `%python` (fork-client.cpp built as GRAPHOPT_PYTHON_FORK_SERVER's client).
Importing torch is 2 s of CPU, most of what a small tool script costs; the server imports it
once, then forks a copy of itself for each command, which becomes that command as
`python SCRIPT ARGS`, `python -m MODULE ARGS` or `python -c CODE ARGS` would: its own
process, argv, sys.path, environment, working directory, standard streams, exit code (or
signal), atexit handlers and non-daemon threads joined at the end. The protocol is graph-opt's
(tools/graph-opt/ForkProtocol.h), so the same client serves both:

    client -> server: u32 length, the request ("argc\\0argv...envc\\0env...cwd\\0", then the
                      client's rlimits), with fds 0, 1 and 2 (SCM_RIGHTS)
    server -> client: b"F" (run the real python yourself) or b"R", then the status
                      (i32 signaled, i32 value) when the command ends

A command is run the real way (b"F") where a fork could differ from it: interpreter options
other than -m and -c, resource limits other than the server's, or an environment that
differs in anything read while Python starts or torch is imported (everything but the
per-command variables below and PYTHONPATH, which is applied to sys.path).

    python python_fork_server.py NAME     (prints "ready" once listening; GRAPHOPT_FORK_SERVER_LOG=FILE
                                           logs each command, forked or not)
"""
import atexit
import ctypes
import io
import os
import resource
import runpy
import select
import signal
import socket
import struct
import sys
import threading
import types

# What the server has loaded for every command: the cost it saves.
import torch  # noqa: F401

# ForkServer.cpp's setPerCommand list (PYTHONPATH is applied to sys.path), and pytest's
# name of the running test: set for each command, read by nothing while Python starts.
PER_COMMAND = ("PWD", "OLDPWD", "_", "SHLVL", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "LC_CTYPE",
               "PYTHONPATH", "PYTEST_CURRENT_TEST")
# ForkProtocol.h's kLimits, in its order.
LIMITS = (resource.RLIMIT_AS, resource.RLIMIT_DATA, resource.RLIMIT_STACK, resource.RLIMIT_CPU,
          resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE,
          resource.RLIMIT_NPROC, resource.RLIMIT_MEMLOCK)
RLIMIT = struct.Struct("=qq")  # struct rlimit on 64-bit Linux, signed as resource.getrlimit's


def comparable_environment(env):
    return {k: v for k, v in env.items() if k not in PER_COMMAND}


def decode(payload):
    """argv, env (a dict), cwd and limits from what ForkProtocol.h's encode() wrote."""
    at = 0

    def next_string():
        nonlocal at
        end = payload.index(b"\0", at)
        s = payload[at:end]
        at = end + 1
        return os.fsdecode(s)

    def strings():
        count = next_string()
        if not count.isdigit() or len(count) > 9:
            raise ValueError("bad count")
        return [next_string() for _ in range(int(count))]

    argv = strings()
    env = {}
    for e in strings():
        k, _, v = e.partition("=")
        env.setdefault(k, v)
    cwd = next_string()
    rest = payload[at:]
    if not argv or len(rest) != RLIMIT.size * len(LIMITS):
        raise ValueError("bad request")
    limits = [RLIMIT.unpack_from(rest, i * RLIMIT.size) for i in range(len(LIMITS))]
    return argv, env, cwd, limits


def receive(conn):
    data, ancdata, _, _ = conn.recvmsg(4, socket.CMSG_SPACE(3 * 4), socket.MSG_WAITALL)
    fds = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack("=%di" % (len(payload) // 4), payload[:len(payload) // 4 * 4]))
    if len(data) != 4 or len(fds) != 3:
        raise ValueError("bad request")
    (length,) = struct.unpack("=I", data)
    if length > 64 << 20:
        raise ValueError("request too long")
    payload = b""
    while len(payload) < length:
        part = conn.recv(length - len(payload))
        if not part:
            raise ValueError("short request")
        payload += part
    return decode(payload), fds


def parse_command(argv):
    """(kind, target, args) for `python SCRIPT|-m MODULE|-c CODE ARGS`, else None."""
    args = argv[1:]
    if not args:
        return None  # an interactive interpreter, or a script on stdin
    first = args[0]
    if first in ("-m", "-c"):
        if len(args) < 2:
            return None
        return first, args[1], args[2:]
    if first.startswith("-"):
        return None  # -u, -X, -W, -E and the like change how Python starts
    return "script", first, args[1:]


def why_not_forked(argv, env, limits, my_env, my_limits):
    if limits != my_limits:
        return "resource limits differ"
    if parse_command(argv) is None:
        return "interpreter options"
    theirs = comparable_environment(env)
    for key in sorted(set(theirs) | set(my_env)):
        if theirs.get(key) != my_env.get(key):
            return "environment differs: " + key
    return ""


def log_command(argv, refusal):
    path = os.environ.get("GRAPHOPT_FORK_SERVER_LOG")
    if not path:
        return
    line = ("forked" if not refusal else "not forked (%s)" % refusal) + " " + " ".join(argv) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line.encode())  # one write: lines never interleave
    finally:
        os.close(fd)


def standard_stream(fd, template):
    """A new sys.std* on fd as Python's start-up would make it for that file."""
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    # PYTHONUNBUFFERED is the same in every forked command (the environments match).
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED")) and fd != 0
    return io.TextIOWrapper(buffered, encoding=template.encoding, errors=template.errors,
                            line_buffering=fd != 0 and not unbuffered and (raw.isatty() or fd == 2),
                            write_through=bool(unbuffered))


def exit_code(e):
    """What the interpreter exits with for SystemExit(e.code)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except Exception:
        pass
    return 1


def report(e):
    """The traceback the interpreter would print: from the command's first frame, without
    this server's and runpy's frames above it."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    sys.excepthook(type(e), e.with_traceback(tb), tb)  # the hook prints e.__traceback__


def run_command(argv, env, cwd, fds, base_path):
    """In the command's process: become `python ARGV` and run it; never returns."""
    code = 125
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for i in range(3):
            os.dup2(fds[i], i)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for i, (name, template) in enumerate((("stdin", sys.__stdin__), ("stdout", sys.__stdout__),
                                              ("stderr", sys.__stderr__))):
            stream = standard_stream(i, template)
            setattr(sys, name, stream)
            setattr(sys, "__%s__" % name, stream)
        kind, target, args = parse_command(argv)
        python_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        python_path = [os.path.abspath(p) for p in python_path]
        if kind == "script":
            first = os.path.dirname(os.path.realpath(target))
        elif kind == "-m":
            first = os.getcwd()
        else:
            first = ""
        sys.path[:] = [first] + python_path + base_path
        sys.path_importer_cache.clear()
        code = 0
        try:
            if kind == "script":
                sys.argv = [target] + args
                runpy.run_path(target, run_name="__main__")
            elif kind == "-m":
                sys.argv = ["-m"] + args  # runpy puts the module's file first
                runpy._run_module_as_main(target, alter_argv=True)
            else:
                sys.argv = ["-c"] + args
                main = types.ModuleType("__main__")
                main.__dict__["__builtins__"] = __builtins__
                sys.modules["__main__"] = main
                exec(compile(target, "<string>", "exec"), main.__dict__)
        except SystemExit as e:
            code = exit_code(e)
        except KeyboardInterrupt as e:
            report(e)
            code = -signal.SIGINT  # the interpreter ends by the signal
        except BaseException as e:
            report(e)
            code = 1
        # What the interpreter does at its end: join non-daemon threads, run atexit
        # handlers, flush the streams (a failed flush of stdout is exit code 120).
        try:
            threading._shutdown()
        except BaseException:
            pass
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                if code == 0:
                    code = 120
    except BaseException as e:
        try:
            os.write(2, ("python fork server: %s\n" % e).encode())
        except OSError:
            pass
    finally:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


def await_command(pid, conn):
    """(signaled, value) when the command ends; kills it where the client goes away."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLRDHUP)
    poller.register(pidfd, select.POLLIN)
    while True:
        events = poller.poll()
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            if os.WIFSIGNALED(status):
                return 1, os.WTERMSIG(status)
            return 0, os.WEXITSTATUS(status)
        if any(fd == conn.fileno() for fd, _ in events):
            break  # the client sends nothing more: it is gone
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return 1, signal.SIGKILL


def handle(conn, my_env, my_limits, base_path):
    """One client, in a process of its own; never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it; this waits
        try:
            (argv, env, cwd, limits), fds = receive(conn)
        except (ValueError, OSError):
            os._exit(0)
        refusal = why_not_forked(argv, env, limits, my_env, my_limits)
        log_command(argv, refusal)
        if refusal:
            conn.sendall(b"F")
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            conn.close()
            run_command(argv, env, cwd, fds, base_path)
        for fd in fds:
            os.close(fd)  # the reader of a pipe the command writes must see its end
        conn.sendall(b"R")
        signaled, value = await_command(pid, conn)
        conn.sendall(struct.pack("=ii", signaled, value))
    except BaseException:
        pass
    os._exit(0)


def main():
    if len(sys.argv) != 2 or not sys.argv[1]:
        print("usage: python_fork_server.py NAME", file=sys.stderr)
        return 2
    # End with lit (PR_SET_PDEATHSIG), even where lit is killed.
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    if os.getppid() != parent:
        return 0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + sys.argv[1])
    listener.listen(64)
    # sys.path as a command would see it, less its first entry and its PYTHONPATH.
    own = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path[1:] if os.path.abspath(p) not in own]
    my_env = comparable_environment(dict(os.environ))
    my_limits = [tuple(resource.getrlimit(which)) for which in LIMITS]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            handle(conn, my_env, my_limits, base_path)
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
