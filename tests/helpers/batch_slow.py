"""A usbeam raw recording whose every read takes ``delay`` seconds more: the fault tests need a
distributed run that is surely still going when they kill a worker.  A module of its own
(importing usbeam.batch) so that worker processes can unpickle it (tests/helpers is on their
path)."""
import time

from usbeam.batch import RawSource


class SlowRawSource(RawSource):
    def __init__(self, path, delay):
        super().__init__(path)
        self.delay = delay

    def _read(self, start, stop):
        time.sleep(self.delay)
        return super()._read(start, stop)
