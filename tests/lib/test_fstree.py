"""Handing a tree to another owner: deep trees and planted links, host side.

Both runners (bubblewrap, Docker) use the same walk.
"""

from __future__ import annotations

import os

import pytest

from replayhub.lib.fstree import chown_tree, remove_tree

NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_tree_deeper_than_the_recursion_limit_is_handed_over(tmp_path, request):
    top = tmp_path / "tree"
    top.mkdir()
    # pytest's own clean-up of old temp dirs recurses: leave no deep tree behind.
    request.addfinalizer(lambda: remove_tree(top))
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):  # deeper than Python's recursion limit, past PATH_MAX
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    secret = tmp_path / "host-file"
    secret.write_text("host")
    (top / "link").symlink_to(secret)

    chown_tree(top, NOBODY, NOBODY)

    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(3000):
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        assert os.fstat(fd).st_uid == NOBODY  # the bottom was reached
    finally:
        os.close(fd)
    assert os.lstat(top / "link").st_uid == NOBODY
    assert secret.stat().st_uid == 0  # the link's target was left alone
