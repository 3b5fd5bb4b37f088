"""Answers: the predictor, what an answer assembles, cross-clock and cross-device answers, recommendations."""
