"""The system calls a sandboxed command may not make, as a seccomp filter.

Defence in depth below the namespaces: the command has no capabilities, so most
of these fail anyway, but each is a large piece of kernel reachable by an
unprivileged process, where privilege escalations keep being found (io_uring,
userfaultfd, bpf, perf events, the key rings, which are not namespaced), or an
escape primitive if a capability ever leaked (file handles, the mount API,
namespace changes, kernel modules, the clock, swap, reboot). Denied calls fail
with EPERM, which programs handle, rather than killing the process; calls from
another ABI (32-bit x86 on a 64-bit host, x32) never reach these rules: the
architecture check of libseccomp kills them.

Some calls are refused only for some arguments:

* ``socket`` and ``socketpair`` create only the address families a build needs
  (:data:`SOCKET_FAMILIES`); any other fails with EAFNOSUPPORT, as it would on a
  kernel built without it. A network namespace covers none of the others:
  AF_VSOCK reaches the hypervisor's vsock transport from inside a VM, and each
  family is a protocol implementation of its own to attack. Netlink is limited
  to NETLINK_ROUTE, which lists interfaces and addresses (getifaddrs).
* ``ptrace``, and the calls that read or write another process's memory or
  descriptors, are refused outright: the only processes in reach are the
  command's own and bwrap's monitor, and a build has no debugger to run.
* ``personality`` may only be queried (0xffffffff): a new execution domain
  changes how the kernel treats the process (READ_IMPLIES_EXEC,
  ADDR_NO_RANDOMIZE). ``modify_ldt`` is refused: 16-bit segments are only ever
  used by exploits and emulators.

The filter is compiled with libseccomp (the system's libseccomp2, through the
``pyseccomp`` ctypes binding) and handed to bubblewrap as BPF (``--seccomp``).
"""

from __future__ import annotations

import errno
import socket
import tempfile
from functools import cache
from types import ModuleType
from typing import Any

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
    "modify_ldt",
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
    # Other processes: tracing them, their memory, their descriptors.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
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

# Unix sockets, IPv4 and IPv6 (loopback, and the relay to the host), and netlink
# for listing interfaces.
SOCKET_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)
NETLINK_ROUTE = 0
PERSONALITY_QUERY = 0xFFFFFFFF


@cache
def filter_bpf() -> bytes:
    """The compiled filter: allow everything but what the module docstring names."""
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
    _refuse_socket_families(rules, seccomp)
    rules.add_rule(
        seccomp.ERRNO(errno.EPERM),
        "personality",
        seccomp.Arg(0, seccomp.NE, PERSONALITY_QUERY),
    )
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def _refuse_socket_families(rules: Any, seccomp: ModuleType) -> None:
    # libseccomp takes one comparison per argument in a rule and ORs the rules,
    # so "not one of these" is spelled out: every other number up to the highest
    # allowed family, then everything above it. The comparisons cover all 64
    # bits of the register, so a family with high bits set (which the kernel
    # would truncate to an allowed one, or not) is refused too.
    refuse = seccomp.ERRNO(errno.EAFNOSUPPORT)
    highest = max(SOCKET_FAMILIES)
    for call in ("socket", "socketpair"):
        for family in range(highest):
            if family not in SOCKET_FAMILIES:
                rules.add_rule(refuse, call, seccomp.Arg(0, seccomp.EQ, family))
        rules.add_rule(refuse, call, seccomp.Arg(0, seccomp.GT, highest))
    rules.add_rule(
        refuse,
        "socket",
        seccomp.Arg(0, seccomp.EQ, socket.AF_NETLINK),
        seccomp.Arg(2, seccomp.NE, NETLINK_ROUTE),
    )
