"""Kustomize directories: the tree of kustomizations and patches (`tree`), the check before a
build (`guard`), the build in its sandbox (`build`), where each built field was written
(`positions`); `load` is the entry the inputs call. Here: the names a kustomization file takes,
which make a directory a Kustomize directory.
"""

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

KUSTOMIZATION_FILES_SET = frozenset(KUSTOMIZATION_FILES)
