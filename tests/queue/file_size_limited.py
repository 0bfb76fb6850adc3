"""``python -m tests.queue.file_size_limited BYTES ARGS...``: the ``remoting`` command with its
file size limit (``RLIMIT_FSIZE``) set to BYTES before it starts, as on a disk with no room: a
write past it fails with a real error from the kernel (EFBIG), as a full disk's ENOSPC."""

from __future__ import annotations

import resource
import sys

from remoting.cli import main

if __name__ == "__main__":
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    sys.exit(main(sys.argv[2:]))
