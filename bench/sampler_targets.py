"""The samplers bench's targets: a log density of ONE flat position written in JAX, with the data
and the ground truth (posterior mean and standard deviation per parameter) of inference-gym.

inference-gym 0.0.5's JAX substrate does not import with this JAX, so each log density is
written here and checked against the NumPy substrate's `unnormalized_log_prob` (`gym_logdensity`,
test/unit/test_bench_samplers.py); data and ground truth come from the NumPy substrate too:

* `ill_conditioned_gaussian`: `IllConditionedGaussian(ndims=100)`, a rotated Gaussian whose
  covariance eigenvalues are inverse-Gamma(0.5) draws (condition number about 1e5);
* `eight_schools`: `EightSchools` written non-centred (school effects = avg_effect +
  exp(log_stddev) * standardized effects); draws are mapped back to inference-gym's centred
  parameters (`reported`) before they are compared with its ground truth;
* `logistic_regression`: inference-gym's `LogisticRegression` (N(0, 1) prior on 25 weights and
  a bias) on a synthetic 1,000 x 25 data set generated here with a fixed seed; it has no bundled
  ground truth, so its mean and standard deviation come from a long reference run with BlackJAX
  stored in bench/data/logistic_regression_reference.json (`python bench/sampler_targets.py
  --reference` writes it again);
* `item_response_theory`: `SyntheticItemResponseTheory` (400 students, 100 questions, 30,012
  bundled answers), flat as [mean_student_ability, centered_student_ability, question_difficulty];
* `neals_funnel`: `NealsFunnel(ndims=10)`, whose neck makes trees differ in depth across chains.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
from collections.abc import Callable

import numpy as np

REFERENCE_PATH = pathlib.Path(__file__).resolve().parent / "data" / "logistic_regression_reference.json"
LOGISTIC_SHAPE = (1000, 25)
LOGISTIC_SEED = 20211


def unchanged(draws: np.ndarray) -> np.ndarray:
    """The draws as they are: the sampled parameters are the ones the ground truth describes."""
    return draws


@dataclasses.dataclass(frozen=True)
class Target:
    """A posterior to sample: `logdensity(q)` of one flat position q [dim] in JAX (up to a
    constant); `reported(draws)` maps draws [..., dim] to the parameters the ground truth
    `truth_mean` / `truth_std` [dim] describe; `gym_logdensity(q)` is inference-gym's
    `unnormalized_log_prob` at one position (NumPy), plus the log Jacobian of `reported`, so it
    differs from `logdensity` by a constant; `tf_logdensity` (or None) is the same density as
    `logdensity` in TensorFlow on a batch of positions [chains, dim] -> [chains] (TFP's NUTS);
    `quick` is (warm-up, kept draws) per chain of `bench/samplers.py --quick` (150 warm-up: the
    shortest with Stan's three buffers; `HEAVY_QUICK` for the targets whose runs take longest)."""

    name: str
    dim: int
    logdensity: Callable
    truth_mean: np.ndarray
    truth_std: np.ndarray
    gym_logdensity: Callable
    reported: Callable = unchanged
    tf_logdensity: Callable | None = None
    quick: tuple[int, int] = (150, 100)


def gym_targets():
    """inference-gym's NumPy substrate's targets (raises ImportError when it is not installed)."""
    from inference_gym import using_numpy

    return using_numpy.targets


def flat_truth(target, keys: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard deviation) of an inference-gym target's identity transformation, flat in
    the order of `keys` (for targets with named parts)."""
    truth = target.sample_transformations["identity"]
    mean, std = truth.ground_truth_mean, truth.ground_truth_standard_deviation
    if keys is None:
        return np.asarray(mean, np.float64), np.asarray(std, np.float64)
    return tuple(
        np.concatenate([np.ravel(part[key]) for key in keys]).astype(np.float64) for part in (mean, std)
    )


HEAVY_QUICK = (40, 30)
"""`Target.quick` of the Gaussian (trees of up to 1,023 leapfrogs of a 100 x 100 product) and the
IRT model (40,000 logits per gradient): 250 transitions took them minutes of CPU per system, so
that `--quick` could not stay within 10 minutes; 40 warm-up iterations still adapt the mass
matrix once (Stan's 15% / 75% / 10% split)."""


def ill_conditioned_gaussian() -> Target:
    import jax.numpy as jnp

    gym = gym_targets().IllConditionedGaussian(ndims=100)
    mean, std = flat_truth(gym)
    cov = np.asarray(gym._gaussian.covariance(), np.float64)
    precision = jnp.asarray(np.linalg.inv(cov))

    def logdensity(q):
        return -0.5 * q @ (precision @ q)

    def tf_logdensity(q):
        import tensorflow as tf

        return -0.5 * tf.reduce_sum(q * tf.linalg.matmul(q, np.asarray(precision)), axis=-1)

    return Target("ill_conditioned_gaussian", 100, logdensity, mean, std, gym.unnormalized_log_prob,
                  tf_logdensity=tf_logdensity, quick=HEAVY_QUICK)  # fmt: skip


TREATMENT_EFFECTS = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
TREATMENT_STDDEVS = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools_centred(q: np.ndarray) -> np.ndarray:
    """Non-centred [avg_effect, log_stddev, standardized effects (8)] -> inference-gym's centred
    [avg_effect, log_stddev, school_effects (8)], on the last axis."""
    avg, log_sd, standardized = q[..., :1], q[..., 1:2], q[..., 2:]
    return np.concatenate([avg, log_sd, avg + np.exp(log_sd) * standardized], axis=-1)


def eight_schools() -> Target:
    import jax.numpy as jnp

    gym = gym_targets().EightSchools()
    keys = ["avg_effect", "log_stddev", "school_effects"]
    mean, std = flat_truth(gym, keys)

    def logdensity(q):
        avg, log_sd, standardized = q[0], q[1], q[2:]
        effects = avg + jnp.exp(log_sd) * standardized
        prior = -0.5 * (avg / 10.0) ** 2 - 0.5 * (log_sd - 5.0) ** 2 - 0.5 * jnp.sum(standardized**2)
        return prior - 0.5 * jnp.sum(((effects - TREATMENT_EFFECTS) / TREATMENT_STDDEVS) ** 2)

    def tf_logdensity(q):
        import tensorflow as tf

        avg, log_sd, standardized = q[:, :1], q[:, 1:2], q[:, 2:]
        effects = avg + tf.exp(log_sd) * standardized
        prior = (-0.5 * (avg[:, 0] / 10.0) ** 2 - 0.5 * (log_sd[:, 0] - 5.0) ** 2
                 - 0.5 * tf.reduce_sum(standardized**2, axis=-1))  # fmt: skip
        return prior - 0.5 * tf.reduce_sum(((effects - TREATMENT_EFFECTS) / TREATMENT_STDDEVS) ** 2, axis=-1)

    def gym_logdensity(q):
        centred = eight_schools_centred(q)
        value = {"avg_effect": centred[0], "log_stddev": centred[1], "school_effects": centred[2:]}
        return gym.unnormalized_log_prob(value) + 8 * q[1]  # + log |d centred / d non-centred|

    return Target(
        "eight_schools", 10, logdensity, mean, std, gym_logdensity, eight_schools_centred, tf_logdensity
    )


def logistic_data() -> tuple[np.ndarray, np.ndarray]:
    """The fixed synthetic data set: features [1000, 25] ~ N(0, 1) and labels from a logistic
    model with weights ~ N(0, 0.5^2) and a bias of 0.3, all from `LOGISTIC_SEED`."""
    rng = np.random.default_rng(LOGISTIC_SEED)
    features = rng.standard_normal(LOGISTIC_SHAPE)
    weights = 0.5 * rng.standard_normal(LOGISTIC_SHAPE[1])
    logits = features @ weights + 0.3
    labels = (rng.uniform(size=LOGISTIC_SHAPE[0]) < 1 / (1 + np.exp(-logits))).astype(np.int32)
    return features, labels


def logistic_logdensity() -> Callable:
    """The JAX log density of the logistic regression: weights [25] then the bias, as
    inference-gym orders them (it appends a column of ones to the features)."""
    import jax
    import jax.numpy as jnp

    features, labels = logistic_data()
    design = jnp.asarray(np.concatenate([features, np.ones((features.shape[0], 1))], axis=1))
    signs = jnp.asarray(2.0 * labels - 1.0)

    def logdensity(q):
        return -0.5 * jnp.sum(q * q) + jnp.sum(jax.nn.log_sigmoid(signs * (design @ q)))

    return logdensity


def logistic_tf_logdensity() -> Callable:
    """The logistic regression's log density in TensorFlow on positions [chains, 26]."""
    import tensorflow as tf

    features, labels = logistic_data()
    design_t = np.concatenate([features, np.ones((features.shape[0], 1))], axis=1).T
    signs = 2.0 * labels - 1.0

    def tf_logdensity(q):
        logits = tf.linalg.matmul(q, design_t)  # [chains, 1000]
        return -0.5 * tf.reduce_sum(q * q, axis=-1) + tf.reduce_sum(
            tf.math.log_sigmoid(signs * logits), axis=-1
        )

    return tf_logdensity


def logistic_regression() -> Target:
    features, labels = logistic_data()
    gym = gym_targets().LogisticRegression(features.astype(np.float32), labels)
    if not REFERENCE_PATH.exists():
        raise FileNotFoundError(
            f"{REFERENCE_PATH} (the logistic regression's reference posterior) is missing: "
            "run `python bench/sampler_targets.py --reference` with BlackJAX installed"
        )
    reference = json.loads(REFERENCE_PATH.read_text())
    mean, std = np.array(reference["mean"]), np.array(reference["std"])
    return Target("logistic_regression", 26, logistic_logdensity(), mean, std, gym.unnormalized_log_prob,
                  tf_logdensity=logistic_tf_logdensity())  # fmt: skip


def item_response_theory() -> Target:
    import jax
    import jax.numpy as jnp

    gym = gym_targets().SyntheticItemResponseTheory()
    keys = ["mean_student_ability", "centered_student_ability", "question_difficulty"]
    mean, std = flat_truth(gym, keys)
    from inference_gym.internal import data

    answers = data.synthetic_item_response_theory()
    students, questions = answers["train_student_ids"], answers["train_question_ids"]
    num_students, num_questions = students.max() + 1, questions.max() + 1
    # +1 correct, -1 wrong, 0 not asked: softplus(-0 * logit) is the constant log 2, without gradient,
    # so the dense sum over all pairs is the likelihood of the answers up to a constant
    signs = np.zeros((num_students, num_questions))
    signs[students, questions] = 2.0 * answers["train_correct"] - 1.0
    signs = jnp.asarray(signs)

    def logdensity(q):
        mean_ability, ability, difficulty = q[0], q[1 : 1 + num_students], q[1 + num_students :]
        logits = mean_ability + ability[:, None] - difficulty[None, :]
        likelihood = -jnp.sum(jax.nn.softplus(-signs * logits))
        prior = -0.5 * (mean_ability - 0.75) ** 2 - 0.5 * jnp.sum(ability**2) - 0.5 * jnp.sum(difficulty**2)
        return prior + likelihood

    dense_signs = np.asarray(signs)

    def tf_logdensity(q):
        import tensorflow as tf

        mean_ability, ability, difficulty = q[:, 0], q[:, 1 : 1 + num_students], q[:, 1 + num_students :]
        logits = mean_ability[:, None, None] + ability[:, :, None] - difficulty[:, None, :]
        likelihood = -tf.reduce_sum(tf.math.softplus(-dense_signs * logits), axis=[1, 2])
        prior = (-0.5 * (mean_ability - 0.75) ** 2 - 0.5 * tf.reduce_sum(ability**2, axis=-1)
                 - 0.5 * tf.reduce_sum(difficulty**2, axis=-1))  # fmt: skip
        return prior + likelihood

    def gym_logdensity(q):
        value = {
            "mean_student_ability": q[0],
            "centered_student_ability": q[1 : 1 + num_students],
            "question_difficulty": q[1 + num_students :],
        }
        return gym.unnormalized_log_prob(value)

    dim = 1 + int(num_students) + int(num_questions)
    return Target(
        "item_response_theory", dim, logdensity, mean, std, gym_logdensity, tf_logdensity=tf_logdensity,
        quick=HEAVY_QUICK,
    )  # fmt: skip


def neals_funnel() -> Target:
    import jax.numpy as jnp

    gym = gym_targets().NealsFunnel(ndims=10)
    mean, std = flat_truth(gym)

    def logdensity(q):
        scale_log, rest = q[0], q[1:]
        return (
            -0.5 * (scale_log / 3.0) ** 2 - 0.5 * jnp.sum(rest**2) * jnp.exp(-scale_log) - 0.5 * 9 * scale_log
        )

    def tf_logdensity(q):
        import tensorflow as tf

        scale_log, rest = q[:, 0], q[:, 1:]
        return (
            -0.5 * (scale_log / 3.0) ** 2 - 0.5 * tf.reduce_sum(rest**2, axis=-1) * tf.exp(-scale_log)
            - 0.5 * 9 * scale_log
        )  # fmt: skip

    return Target(
        "neals_funnel", 10, logdensity, mean, std, gym.unnormalized_log_prob, tf_logdensity=tf_logdensity
    )


BUILDERS: dict[str, Callable[[], Target]] = {
    "ill_conditioned_gaussian": ill_conditioned_gaussian,
    "eight_schools": eight_schools,
    "logistic_regression": logistic_regression,
    "item_response_theory": item_response_theory,
    "neals_funnel": neals_funnel,
}


def initial_positions(dim: int, chains: int, seed: int) -> np.ndarray:
    """Stan's default initialization: uniform on [-2, 2] per coordinate, [chains, dim]."""
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=(chains, dim))


def write_reference(chains: int = 64, num_warmup: int = 1000, num_draws: int = 5000) -> None:
    """The logistic regression's reference posterior (mean and standard deviation of every
    draw of a long BlackJAX run) into REFERENCE_PATH, with its bulk ESS and R-hat."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from sampler_diagnostics import bulk_ess, rank_rhat
    from sampler_systems import blackjax_sample

    positions = initial_positions(26, chains, seed=1)
    sample = blackjax_sample(logistic_logdensity(), positions, num_warmup, num_draws, seed=12345)
    draws = sample.draws
    reference = {
        "made_by": "python bench/sampler_targets.py --reference",
        "sampler": f"BlackJAX NUTS, window adaptation; {chains} chains, {num_warmup} warm-up and {num_draws} kept draws",
        "min_bulk_ess": float(bulk_ess(draws).min()),
        "max_rhat": float(rank_rhat(draws).max()),
        "divergences": int(sample.divergent.sum()),
        "mean": draws.mean(axis=(0, 1)).tolist(),
        "std": draws.std(axis=(0, 1)).tolist(),
    }
    REFERENCE_PATH.parent.mkdir(exist_ok=True)
    REFERENCE_PATH.write_text(json.dumps(reference, indent=1) + "\n")
    print(
        f"wrote {REFERENCE_PATH}: min bulk ESS {reference['min_bulk_ess']:.0f}, max R-hat {reference['max_rhat']:.4f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reference", action="store_true", help="write the logistic regression's reference posterior"
    )
    if parser.parse_args().reference:
        write_reference()
