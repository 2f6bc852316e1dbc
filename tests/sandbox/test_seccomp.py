"""The seccomp filter's contents: every denied call is a real system call here."""

from __future__ import annotations

import platform

import pyseccomp
import pytest

from replayhub.sandbox.seccomp import DENIED, filter_bpf


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 syscall table")
def test_every_denied_name_is_a_system_call_of_this_architecture():
    unknown = [
        name
        for name in DENIED
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) < 0
    ]
    assert unknown == []


def test_the_filter_compiles_to_bpf_with_a_rule_per_call():
    program = filter_bpf()
    # Eight bytes per BPF instruction; at least one comparison per denied call.
    assert len(program) % 8 == 0
    assert len(program) // 8 > len(DENIED)
