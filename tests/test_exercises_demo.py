"""The warm-up exercises of nbs/00e_exercises.ipynb: the solutions pass, typical wrong answers fail (exercise_harness)."""
import numpy as np

from exercise_harness import chapter_tests

WRONG = {
    "demo.1": [
        lambda x, mu, sigma: -np.log(sigma) - (x - mu) ** 2 / (2 * sigma ** 2),                      # no 2*pi term
        lambda x, mu, sigma: -0.5 * np.log(2 * np.pi) - np.log(sigma) - (x - mu) ** 2 / (2 * sigma),  # sigma, not sigma^2
        lambda x, mu, sigma: -0.5 * np.log(2 * np.pi * sigma) - (x - mu) ** 2 / (2 * sigma ** 2),   # log sigma/2
        lambda x, mu, sigma: np.exp(-0.5 * ((x - mu) / sigma) ** 2) / np.sqrt(2 * np.pi) / sigma,   # density, not log
    ],
    "demo.2": [4.0, 0.4 ** 0.5, 0.2, 0.04, lambda: 4 / 9],
}

test_solution_passes, test_wrong_answer_fails, test_every_checker_has_two_wrong_answers = chapter_tests("demo", WRONG)
