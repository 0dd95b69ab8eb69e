"""The explorer's admin app: curation of a hosted explorer, in its own process.

``repogym explore admin --data DIR`` serves it; it writes the settings and audit log of
:mod:`repogym.explorer.curation` that the public explorer (``repogym explore --data DIR``)
reads. The public explorer never imports this package.
"""

from repogym.explorer.admin.app import create_admin_app
from repogym.explorer.admin.auth import AuthConfig, AuthError, hash_password, verify_password

__all__ = ["AuthConfig", "AuthError", "create_admin_app", "hash_password", "verify_password"]
