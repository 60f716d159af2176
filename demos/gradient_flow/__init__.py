"""Gradient flow: vanishing and exploding gradients across depth, clipping, dead ReLUs."""
