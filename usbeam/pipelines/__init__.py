"""Whole chains with every plan and buffer built once: RF -> IQ -> DAS -> B-mode
(:class:`Pipeline`, bmode.py) and RF -> IQ -> DAS -> clutter filter -> color / power Doppler
(:class:`DopplerPipeline`, doppler.py)."""
from .bmode import Pipeline
from .doppler import DopplerMaps, DopplerPipeline

__all__ = ["Pipeline", "DopplerPipeline", "DopplerMaps"]
