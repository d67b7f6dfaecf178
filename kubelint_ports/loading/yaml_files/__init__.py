"""YAML and JSON manifests: the composer's node tree (`yamltree`), a document's place
(`documents`) and the manifest reader (`manifests`).
"""
