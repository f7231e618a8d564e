"""A build backend that only names the sdist, for `pip download` (never imported
by the harness itself).

pip downloads an sdist only after preparing its metadata, and it prepares it
by running the build backend the sdist names: for vLLM, setuptools running
setup.py, which imports torch and needs cmake, ninja and setuptools_rust. The
harness needs the archive, not its metadata, so `harness.trees.sources`
copies this file into a scratch directory as ``setuptools/build_meta.py`` and
puts that directory first on the PYTHONPATH of `pip download
--no-build-isolation`: pip then asks this module, which writes the name and
version the requirement pins (HARNESS_STANDIN_NAME, HARNESS_STANDIN_VERSION)
and nothing else. Nothing from the archive runs, and no build tool is needed.
"""

import os
from types import SimpleNamespace


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name = os.environ["HARNESS_STANDIN_NAME"]
    version = os.environ["HARNESS_STANDIN_VERSION"]
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    os.mkdir(os.path.join(metadata_directory, info))
    with open(os.path.join(metadata_directory, info, "METADATA"), "w") as metadata:
        metadata.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return info


# What pip names for an sdist without a pyproject.toml.
__legacy__ = SimpleNamespace(
    get_requires_for_build_wheel=get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel=prepare_metadata_for_build_wheel,
)
