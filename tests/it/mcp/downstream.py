"""A wrapper around the downstream MCP server for the gateway tests.

    downstream.py MODE PROGRAM [ARG...]

runs PROGRAM with its stdin and stdout relayed line by line, and fails at
one chosen moment, found by what the lines say (never by time):

- "relay": relays everything;
- "lose": once the server answers the write ("Successfully wrote"), the
  answer is dropped and the server killed: the write happened, its answer
  is lost;
- "hold": the write's answer is dropped and the wrapper keeps still until
  it is killed (the caller's timeout);
- "crash": the moment a tools/call of write_file arrives, the wrapper and
  the server die before the server has read it;
- "count=FILE": relays everything, and appends one line to FILE as it
  starts (how many servers were started).
"""

import os
import signal
import subprocess
import sys
import threading

mode = sys.argv[1]
if mode.startswith("count="):
    with open(mode[len("count="):], "a") as starts:
        starts.write("started\n")
server = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def die(code):
    server.kill()
    os._exit(code)


def requests():
    for line in sys.stdin.buffer:
        if mode == "crash" and b'"tools/call"' in line and b'"write_file"' in line:
            die(3)
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()


threading.Thread(target=requests, daemon=True).start()
for line in server.stdout:
    if b"Successfully wrote" in line:
        if mode == "lose":
            die(4)
        if mode == "hold":
            signal.pause()
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
server.wait()
