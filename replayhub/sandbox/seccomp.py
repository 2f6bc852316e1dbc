"""The system calls a sandboxed command may not make, as a seccomp filter.

Defence in depth below the namespaces: the command has no capabilities, so most
of these fail anyway, but each is a large piece of kernel reachable by an
unprivileged process, where privilege escalations keep being found (io_uring,
userfaultfd, bpf, perf events, the key rings, which are not namespaced), or an
escape primitive if a capability ever leaked (file handles, the mount API,
namespace changes, kernel modules, the clock, swap, reboot). Denied calls fail
with EPERM, which programs handle, rather than killing the process; calls from
another ABI (32-bit x86 on a 64-bit host) are refused the same way by
libseccomp's architecture check.

The filter is compiled with libseccomp (the system's libseccomp2, through the
``pyseccomp`` ctypes binding) and handed to bubblewrap as BPF (``--seccomp``).
"""

from __future__ import annotations

import errno
import tempfile
from functools import cache

from replayhub.sandbox.base import SandboxUnavailable

DENIED = (
    # Kernel attack surface reachable without privileges.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    # Escape primitives, should a capability ever leak.
    "open_by_handle_at",
    "name_to_handle_at",
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
    # The host's kernel and clock.
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "quotactl",
    "lookup_dcookie",
    "iopl",
    "ioperm",
)


@cache
def filter_bpf() -> bytes:
    """The compiled filter: allow everything but :data:`DENIED` (EPERM)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError, OSError) as error:
        raise SandboxUnavailable(
            f"libseccomp is not available ({error}); install libseccomp2."
        ) from error
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (ValueError, RuntimeError, OSError):
            continue  # not a system call on this architecture
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()
