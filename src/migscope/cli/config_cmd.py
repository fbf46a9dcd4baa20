"""``migscope validate-config``: placeholder, being written."""

import click


@click.command("validate-config")
def validate_config() -> None:
    """Validate a mig-parted config."""
