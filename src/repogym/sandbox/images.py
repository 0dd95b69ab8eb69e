"""Prebuilt environment images, for the layers above the sandbox (``images`` commands, hub):
make the OCI image of a local build, push it, pull it, load it. The modules behind these names
(:mod:`._image_export`, :mod:`._push`, :mod:`._registry`, :mod:`._pull`, …) hold the details."""

from __future__ import annotations

from repogym.sandbox._blobs import BlobError
from repogym.sandbox._image_export import ExportError, Image
from repogym.sandbox._image_run import endpoint_for_image, pull_task_image
from repogym.sandbox._images import ImageRef, ImageRefError
from repogym.sandbox._images import parse as parse_image_ref
from repogym.sandbox._local_image import image_of
from repogym.sandbox._pull import parse_registries
from repogym.sandbox._push import Pusher, PushError, PushStats, endpoint_of
from repogym.sandbox._registry import RegistryClient, RegistryError, Resolved
from repogym.sandbox._registry_auth import credentials_for
from repogym.sandbox._unpack import UnpackError

__all__ = [
    "BlobError",
    "ExportError",
    "Image",
    "ImageRef",
    "ImageRefError",
    "PushError",
    "PushStats",
    "Pusher",
    "RegistryClient",
    "RegistryError",
    "Resolved",
    "UnpackError",
    "credentials_for",
    "endpoint_for_image",
    "endpoint_of",
    "image_of",
    "parse_image_ref",
    "parse_registries",
    "pull_task_image",
]
