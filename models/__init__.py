"""The shipped classifier (patterncnn.onnx, its checkpoint, metrics and model card), and the annotation guide.

Installed as the package ``patterncnn.shipped`` (see pyproject.toml), so that every install, editable
or from a wheel, finds the default classifier: :func:`patterncnn.classifier.onnx.default_classifier`.
``ANNOTATION_GUIDE.md`` links to ``annotations/ANNOTATION_GUIDE.md`` (a wheel holds a copy), so that
``annotate push`` reads the guide's version wherever patterncnn is installed:
:func:`patterncnn.labelling.push.guide_version`.
"""
