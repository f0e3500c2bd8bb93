"""The worker threads of a live session (the compute thread; the CUDA upload thread).

Every backend's session (session.py, cuda_session.py) runs its workers with
:func:`run_weakly`, and a worker's take returns :data:`EXIT` to end the loop.  They live
here, below both session modules, so that a backend needs nothing private from the base
session (review of the architecture, 2.4 item 3).

Why weakly: a running session nobody references any more must be collected (its pinned or
page-aligned buffers freed, its threads ended), as a ``concurrent.futures`` executor's
workers let their executor go.
"""

EXIT = object()  # a worker's take: the loop ends


def run_weakly(ref, cv, name):
    """Body of a session's worker thread (the compute thread; the CUDA upload thread).

    It holds the session only through the weak reference ``ref`` between work items (as
    concurrent.futures.ThreadPoolExecutor's workers hold their executor), so that a running
    session nobody references any more is collected: its buffers are freed and the thread
    ends at its next look (at most 0.1 s later; the session's __del__ wakes it at once).
    The session's ``_<name>_take_locked()`` returns a work item, None (nothing yet: wait)
    or EXIT; ``_<name>_run(item)`` runs one item without the lock;
    ``_<name>_exit_locked()`` is the loop's last act (the loop, not stop(), ends a worker's
    state, so that stop() called on the worker itself, from a callback, only signals).
    """
    take, run, leave = f"_{name}_take_locked", f"_{name}_run", f"_{name}_exit_locked"
    session = ref()
    if session is None:
        return
    getattr(session, f"_{name}_begin")()
    del session
    while True:
        with cv:
            while True:
                session = ref()
                if session is None:
                    return
                item = getattr(session, take)()
                if item is EXIT:
                    getattr(session, leave)()
                    return
                if item is not None:
                    break
                # no strong reference while waiting (if this was the last one, __del__ runs
                # here, with the lock held: it cannot take it and does nothing, and the next
                # look finds the reference gone)
                del session
                cv.wait(0.1)
        getattr(session, run)(item)
        del session, item
