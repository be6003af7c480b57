"""patterncnn: classify BERT-family self-attention maps into the five patterns of
Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT*.

Pipeline: glue -> encoder -> maps -> (render -> annotate -> labels) -> train -> infer -> census / serve.
Run ``patterncnn --help`` for the commands.
"""

__version__ = "0.1.0"
