"""Kustomize directories: the tree of kustomizations and patches (`tree`), the check before a
build (`guard`), the build in its sandbox (`build`), where each built field was written
(`positions`); `load` is the entry the inputs call.
"""
