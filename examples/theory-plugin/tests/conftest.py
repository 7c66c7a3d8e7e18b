"""The plugin's tests run against the installed distribution (``pip install -e examples/theory-plugin``, or the
wheel): resprop must find the theory through its ``resprop.theories`` entry point."""
import pytest

from resprop import registry


@pytest.fixture(scope="session", autouse=True)
def installed():
    if "schoenholz" not in registry.slugs():
        pytest.exit("resprop does not list the theory schoenholz: install the plugin first "
                    "(pip install -e examples/theory-plugin)", returncode=4)
    return registry.theory("schoenholz")
