"""The one typed configuration of a training run: defaults < YAML file < command-line flags.

`Config` holds five sections by role (`sections.py`); flags and the keys of `config.yaml` stay flat (`--lr`,
`lr: 0.1`); a YAML file may also use the nested form (`optim: {lr: 0.1}`). `schema.py` makes the typed Config from
flat values, `files.py` reads flags and YAML (and writes config.yaml, versioned). Values are converted to their
declared type or refused with a `ConfigError` naming the key, and `validate` checks what involves several fields —
all before any process starts. The standard library and PyYAML only: the command line starts without torch.
"""

from .files import (
    CONFIG_VERSION,
    add_config_flags,
    add_option_flags,
    build_config,
    check_known_keys,
    load_yaml,
    migrate,
    save_yaml,
)
from .schema import Config, Option, coerce, options
from .sections import (
    SECTION_TITLES,
    SECTIONS,
    Channels,
    DataConfig,
    LaunchConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    format_channels,
    opt,
    parse_channels,
    require,
)

__all__ = [
    "CONFIG_VERSION",
    "Channels",
    "Config",
    "DataConfig",
    "LaunchConfig",
    "ModelConfig",
    "OptimConfig",
    "Option",
    "RunConfig",
    "SECTIONS",
    "SECTION_TITLES",
    "add_config_flags",
    "add_option_flags",
    "build_config",
    "check_known_keys",
    "coerce",
    "format_channels",
    "load_yaml",
    "migrate",
    "opt",
    "options",
    "parse_channels",
    "require",
    "save_yaml",
]
