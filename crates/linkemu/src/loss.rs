//! The packet-loss process on its own: one draw per packet from a [`LossModel`], with the
//! Gilbert–Elliott state carried between draws. Used by [`crate::Link`] and by anything else
//! that needs the same loss pattern without the timing (e.g. the VLBI loss model).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::LossModel;

/// A seeded, deterministic sequence of lose / keep decisions.
#[derive(Debug, Clone)]
pub struct LossProcess {
    model: LossModel,
    /// Gilbert–Elliott state: true while Bad.
    bad: bool,
    rng: Xoshiro256PlusPlus,
}

impl LossProcess {
    /// A process drawing from `rng`. Gilbert–Elliott starts in its stationary distribution so
    /// that short runs are unbiased (starting in Good would under-count loss).
    pub fn with_rng(model: LossModel, mut rng: Xoshiro256PlusPlus) -> Self {
        let bad = match model {
            LossModel::GilbertElliott(ge) => rng.gen::<f64>() < ge.stationary_bad(),
            _ => false,
        };
        LossProcess { model, bad, rng }
    }

    /// A process seeded with `seed`.
    pub fn new(model: LossModel, seed: u64) -> Self {
        Self::with_rng(model, Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// Whether the next packet is lost.
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => self.rng.gen::<f64>() < p,
            LossModel::GilbertElliott(ge) => {
                // Transition first, then lose with the new state's probability.
                let flip = if self.bad { ge.p_bad_to_good } else { ge.p_good_to_bad };
                if self.rng.gen::<f64>() < flip {
                    self.bad = !self.bad;
                }
                let p = if self.bad { ge.loss_in_bad } else { ge.loss_in_good };
                self.rng.gen::<f64>() < p
            }
        }
    }
}
