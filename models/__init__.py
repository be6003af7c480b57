"""The shipped classifier (patterncnn.onnx, its checkpoint, metrics and model card).

Installed as the package ``patterncnn.shipped`` (see pyproject.toml), so that every install, editable
or from a wheel, finds the default classifier: :func:`patterncnn.classifier.onnx.default_classifier`.
"""
