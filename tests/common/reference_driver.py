#!/usr/bin/env python3
"""Runs reference scripts one after another in one interpreter (tests/common/reference_python.h).

Importing torch and transformers takes about 5 s; a test binary that asks a reference twenty
times would spend most of its time there. This driver imports nothing itself: each script runs
as `__main__` with its own argv, environment and working directory, exactly as
`python SCRIPT ARGS...` would, and the modules it imports stay loaded for the next one.

Protocol, over the socket at fd 3, so that stdin and stdout stay the script's:
  request:  a count line, then each field as "<length>\\n<bytes>": the working directory, the
            script, its arguments, then NAME=VALUE environment entries (count = 2 + args + env,
            the argument count first: "<count> <argc>\\n")
  reply:    "<exit status> <length>\\n" and that many bytes of what the script printed
            (stdout and stderr together, as `2>&1`)
"""
import os
import runpy
import sys
import tempfile
import traceback

requests = os.fdopen(3, "rb")
replies = os.fdopen(os.dup(3), "wb")


def read_field():
    length = int(requests.readline())
    return requests.read(length).decode("utf-8", "surrogateescape")


def run(directory, script, args, environment):
    os.chdir(directory)
    os.environ.clear()
    os.environ.update(environment)
    sys.argv = [script] + args
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as done:
        if done.code is None:
            return 0
        if isinstance(done.code, int):
            return done.code
        print(done.code, file=sys.stderr)
        return 1
    except BaseException:  # the script's failure is its exit status, as for `python SCRIPT`
        traceback.print_exc()
        return 1


def main():
    home = os.getcwd()
    while True:
        header = requests.readline()
        if not header:
            return
        count, argc = (int(word) for word in header.split())
        fields = [read_field() for _ in range(count)]
        directory, script = fields[0], fields[1]
        args, environment = fields[2:2 + argc], fields[2 + argc:]
        with tempfile.TemporaryFile() as output:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = (os.dup(1), os.dup(2))
            os.dup2(output.fileno(), 1)
            os.dup2(output.fileno(), 2)
            try:
                status = run(directory, script, args, dict(entry.split("=", 1) for entry in environment))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
                os.chdir(home)
            output.seek(0)
            printed = output.read()
        replies.write(b"%d %d\n" % (status, len(printed)))
        replies.write(printed)
        replies.flush()


if __name__ == "__main__":
    main()
