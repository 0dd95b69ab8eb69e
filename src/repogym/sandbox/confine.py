"""Lookups that cannot leave a root, for code outside the sandbox package (see
:mod:`repogym.sandbox._confine`, which the fork server loads by file name).

``Root.at(folder, beneath=True)`` opens a folder whose lookups may not leave it; its
:meth:`~Root.open`, :meth:`~Root.parent`, :meth:`~Root.makedirs` return descriptors, and the
functions below act on ``(folder descriptor, name)`` without following anything.
"""

from repogym.sandbox._confine import (
    Root,
    clear_folder,
    kernel_resolver,
    link_meta,
    open_entry,
    remove_entry,
    same_entry,
    set_meta,
    walk_fd,
)

__all__ = [
    "Root",
    "clear_folder",
    "kernel_resolver",
    "link_meta",
    "open_entry",
    "remove_entry",
    "same_entry",
    "set_meta",
    "walk_fd",
]
