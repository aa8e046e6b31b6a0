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
  --reference logistic_regression` writes it again);
* `item_response_theory`: `SyntheticItemResponseTheory` (400 students, 100 questions, 30,012
  bundled answers), flat as [mean_student_ability, centered_student_ability, question_difficulty];
  `--quick` samples `item_response_theory_50x20` instead (`QUICK_BUILDERS`): inference-gym's
  `ItemResponseTheory` model on the bundled answers of the first 50 students to the first 20
  questions, whose ground truth, as the logistic regression's, is a long BlackJAX run stored in
  bench/data (`python bench/sampler_targets.py --reference item_response_theory_50x20`);
* `neals_funnel`: `NealsFunnel(ndims=10)`, whose neck makes trees differ in depth across chains.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
from collections.abc import Callable

import numpy as np

DATA = pathlib.Path(__file__).resolve().parent / "data"
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


def reference_path(name: str) -> pathlib.Path:
    return DATA / f"{name}_reference.json"


def reference_truth(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard deviation) per parameter of target `name`'s stored reference run."""
    path = reference_path(name)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} ({name}'s reference posterior) is missing: run "
            f"`python bench/sampler_targets.py --reference {name}` with BlackJAX installed"
        )
    reference = json.loads(path.read_text())
    return np.array(reference["mean"]), np.array(reference["std"])


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
    mean, std = reference_truth("logistic_regression")
    return Target("logistic_regression", 26, logistic_logdensity(), mean, std, gym.unnormalized_log_prob,
                  tf_logdensity=logistic_tf_logdensity())  # fmt: skip


IRT_QUICK_SHAPE = (50, 20)
"""`--quick`'s item-response-theory data (`QUICK_BUILDERS`): the bundled answers of the first 50
students to the first 20 questions (772 of the 30,012 answers). A gradient's cost grows with
students x questions and the warm-up's trees are deep for every system, so the full 400 x 100
data set does not fit `--quick`'s budget (docs/performance.md, "NUTS on users' models")."""


def irt_answers(shape: tuple[int, int] | None) -> dict[str, np.ndarray]:
    """inference-gym's bundled synthetic answers (`train_student_ids`, `train_question_ids`,
    `train_correct`), all of them, or those of the first `shape` = (students, questions)."""
    from inference_gym.internal import data

    answers = data.synthetic_item_response_theory()
    train = {key: answers[key] for key in ("train_student_ids", "train_question_ids", "train_correct")}
    if shape is None:
        return train
    kept = (train["train_student_ids"] < shape[0]) & (train["train_question_ids"] < shape[1])
    return {key: value[kept] for key, value in train.items()}


def irt_logdensities(answers: dict[str, np.ndarray]) -> tuple[Callable, Callable, int]:
    """(JAX log density of one position, TensorFlow log density of a batch of positions, dim) of
    the item-response-theory model on `answers`, flat as [mean_student_ability,
    centered_student_ability, question_difficulty]."""
    import jax
    import jax.numpy as jnp

    students, questions = answers["train_student_ids"], answers["train_question_ids"]
    num_students, num_questions = int(students.max()) + 1, int(questions.max()) + 1
    # +1 correct, -1 wrong, 0 not asked: softplus(-0 * logit) is the constant log 2, without gradient,
    # so the dense sum over all pairs is the likelihood of the answers up to a constant
    dense_signs = np.zeros((num_students, num_questions))
    dense_signs[students, questions] = 2.0 * answers["train_correct"] - 1.0
    signs = jnp.asarray(dense_signs)

    def logdensity(q):
        mean_ability, ability, difficulty = q[0], q[1 : 1 + num_students], q[1 + num_students :]
        logits = mean_ability + ability[:, None] - difficulty[None, :]
        likelihood = -jnp.sum(jax.nn.softplus(-signs * logits))
        prior = -0.5 * (mean_ability - 0.75) ** 2 - 0.5 * jnp.sum(ability**2) - 0.5 * jnp.sum(difficulty**2)
        return prior + likelihood

    def tf_logdensity(q):
        import tensorflow as tf

        mean_ability, ability, difficulty = q[:, 0], q[:, 1 : 1 + num_students], q[:, 1 + num_students :]
        logits = mean_ability[:, None, None] + ability[:, :, None] - difficulty[:, None, :]
        likelihood = -tf.reduce_sum(tf.math.softplus(-dense_signs * logits), axis=[1, 2])
        prior = (-0.5 * (mean_ability - 0.75) ** 2 - 0.5 * tf.reduce_sum(ability**2, axis=-1)
                 - 0.5 * tf.reduce_sum(difficulty**2, axis=-1))  # fmt: skip
        return prior + likelihood

    return logdensity, tf_logdensity, 1 + num_students + num_questions


def irt_name(shape: tuple[int, int] | None) -> str:
    return "item_response_theory" if shape is None else f"item_response_theory_{shape[0]}x{shape[1]}"


def item_response_theory(shape: tuple[int, int] | None = None) -> Target:
    """inference-gym's `SyntheticItemResponseTheory` with its ground truth; with `shape` =
    (students, questions), its `ItemResponseTheory` model on the answers of the first students
    to the first questions (`irt_answers`), named `item_response_theory_<students>x<questions>`,
    whose ground truth is a long reference run (`write_reference`)."""
    answers = irt_answers(shape)
    if shape is None:
        gym = gym_targets().SyntheticItemResponseTheory()
        mean, std = flat_truth(gym, ["mean_student_ability", "centered_student_ability", "question_difficulty"])
    else:
        gym = gym_targets().ItemResponseTheory(**answers)
        mean, std = reference_truth(irt_name(shape))
    logdensity, tf_logdensity, dim = irt_logdensities(answers)
    num_students = int(answers["train_student_ids"].max()) + 1

    def gym_logdensity(q):
        value = {
            "mean_student_ability": q[0],
            "centered_student_ability": q[1 : 1 + num_students],
            "question_difficulty": q[1 + num_students :],
        }
        return gym.unnormalized_log_prob(value)

    return Target(irt_name(shape), dim, logdensity, mean, std, gym_logdensity, tf_logdensity=tf_logdensity,
                  quick=HEAVY_QUICK)  # fmt: skip


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
QUICK_BUILDERS: dict[str, Callable[[], Target]] = {
    "item_response_theory": functools.partial(item_response_theory, IRT_QUICK_SHAPE),
}
"""The targets `--quick` samples in place of `BUILDERS`' (smaller data sets of the same model)."""
REFERENCE_DENSITIES: dict[str, Callable[[], tuple[Callable, int]]] = {
    "logistic_regression": lambda: (logistic_logdensity(), LOGISTIC_SHAPE[1] + 1),
    irt_name(IRT_QUICK_SHAPE): lambda: irt_logdensities(irt_answers(IRT_QUICK_SHAPE))[::2],
}
"""(JAX log density, dim) of the targets whose ground truth is a stored reference run."""


def initial_positions(dim: int, chains: int, seed: int) -> np.ndarray:
    """Stan's default initialization: uniform on [-2, 2] per coordinate, [chains, dim]."""
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=(chains, dim))


def write_reference(name: str, chains: int = 64, num_warmup: int = 1000, num_draws: int = 5000) -> None:
    """Target `name`'s reference posterior (mean and standard deviation of every draw of a long
    BlackJAX run) into `reference_path(name)`, with its bulk ESS and R-hat."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from sampler_diagnostics import bulk_ess, rank_rhat
    from sampler_systems import blackjax_sample

    logdensity, dim = REFERENCE_DENSITIES[name]()
    positions = initial_positions(dim, chains, seed=1)
    sample = blackjax_sample(logdensity, positions, num_warmup, num_draws, seed=12345)
    draws = sample.draws
    reference = {
        "made_by": f"python bench/sampler_targets.py --reference {name}",
        "sampler": f"BlackJAX NUTS, window adaptation; {chains} chains, {num_warmup} warm-up and {num_draws} kept draws",
        "min_bulk_ess": float(bulk_ess(draws).min()),
        "max_rhat": float(rank_rhat(draws).max()),
        "divergences": int(sample.divergent.sum()),
        "mean": draws.mean(axis=(0, 1)).tolist(),
        "std": draws.std(axis=(0, 1)).tolist(),
    }
    path = reference_path(name)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(reference, indent=1) + "\n")
    print(f"wrote {path}: min bulk ESS {reference['min_bulk_ess']:.0f}, max R-hat {reference['max_rhat']:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reference", nargs="+", choices=list(REFERENCE_DENSITIES), metavar="TARGET",
        help=f"write these targets' reference posteriors ({', '.join(REFERENCE_DENSITIES)})",
    )  # fmt: skip
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=5000)
    args = parser.parse_args()
    for name in args.reference or []:
        write_reference(name, args.chains, args.warmup, args.draws)
