"""Harbor task directories: model, discovery, content hash, validation, dataset files."""

from repogym.taskdir.config import (
    SCHEMA_VERSION,
    TaskConfig,
    new_task_config,
    normalize_legacy,
    parse_size_mb,
)
from repogym.taskdir.discover import (
    Discovered,
    DuplicateIdError,
    check_unique_ids,
    discover,
    duplicate_id_message,
    duplicate_ids,
    iter_task_dirs,
)
from repogym.taskdir.hashing import content_hash
from repogym.taskdir.task import (
    Task,
    TaskError,
    atomic_write,
    dump_task_toml,
    load_task,
    parse_task_toml,
    publish_task_dir,
    save_task_config,
    set_content_hash,
    update_task_toml,
    write_task_toml,
)

__all__ = [
    "SCHEMA_VERSION",
    "Discovered",
    "DuplicateIdError",
    "Task",
    "TaskConfig",
    "TaskError",
    "atomic_write",
    "check_unique_ids",
    "content_hash",
    "discover",
    "dump_task_toml",
    "duplicate_id_message",
    "duplicate_ids",
    "iter_task_dirs",
    "load_task",
    "new_task_config",
    "normalize_legacy",
    "parse_size_mb",
    "parse_task_toml",
    "publish_task_dir",
    "save_task_config",
    "set_content_hash",
    "update_task_toml",
    "write_task_toml",
]
