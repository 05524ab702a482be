"""The optional compiled part of ddptrain: region decoding of JPEGs with the system's libjpeg-turbo.

Everything else is in pyproject.toml. Where no C compiler or libjpeg-turbo headers are found the extension is left
out (``optional=True``) and ddptrain decodes whole images instead (`ddptrain bench input` says which it uses)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ddptrain.data._jpegregion",
            sources=["src/ddptrain/data/_jpegregion.c"],
            libraries=["jpeg"],
            optional=True,
        )
    ]
)
