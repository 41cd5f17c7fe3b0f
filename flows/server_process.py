"""Prefect's temporary API server, as a process that ends with the command that started it.

``python -m flows.server_process --parent PID --port PORT`` runs Prefect's documented ``prefect server
start`` in the foreground on 127.0.0.1:PORT, without the UI and with only the services a run needs
(the task-run recorder, the event persister and the other event services, as Prefect's own temporary
server runs; the scheduler, late runs and the other loop services are switched off by their public
``PREFECT_SERVER_SERVICES_*_ENABLED`` settings).

A thread watches PID: when the command that started the server has gone, even by SIGKILL, which no
signal handler sees, the server stops itself within a second, as it stops on SIGTERM; should that
graceful stop hang (a service that does not finish, a lock), the thread ends the process after
``GRACE_S``. The thread polls ``os.getppid()``: a process whose parent dies is given another parent
(init or a subreaper), so the poll cannot be fooled by a reused pid, needs no kernel feature, and
fires whichever thread of the command started the server (``PR_SET_PDEATHSIG`` fires when that
*thread* ends, which would stop a server started from a worker thread while the command still runs).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

# Loop services a temporary server does not need: scheduled and late runs belong to deployments on a
# real server; the rest watch runs and workers that a command's own server never has.
SERVICES_OFF = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS",
                "REPOSSESSOR", "DB_VACUUM")
WATCH_EVERY_S = 0.5
GRACE_S = 10.0  # a graceful stop takes about 1 s; past this the process ends without one


def watch_parent(parent: int, every_s: float = WATCH_EVERY_S, grace_s: float = GRACE_S) -> None:
    """Stop this process (as SIGTERM does) once ``parent`` is no longer its parent; end it outright if
    the graceful stop has not ended it ``grace_s`` later."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parent", type=int, required=True, help="The process whose end ends the server.")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    threading.Thread(target=watch_parent, args=(args.parent,), name="watch-parent", daemon=True).start()
    for service in SERVICES_OFF:
        os.environ[f"PREFECT_SERVER_SERVICES_{service}_ENABLED"] = "false"
    from prefect.cli import app

    # the ``prefect`` command's own entry point, which reads its arguments from the command line
    sys.argv = ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(args.port), "--no-ui",
                "--no-scheduler", "--no-late-runs", "--analytics-off",
                "--log-level", os.environ.get("PREFECT_SERVER_LOGGING_LEVEL", "ERROR")]
    app()


if __name__ == "__main__":
    main()
