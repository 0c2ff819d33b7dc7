//! Stored cron schedules: added, replaced, paused, resumed and removed by
//! an operator, each change audited.

use crate::cron::{
    ScheduleActed, ScheduleAction, ScheduleAdd, ScheduleAddOutcome, ScheduleAdded, ScheduleChange,
    StoredSchedule,
};
use crate::error::{Error, Result};
use crate::ids::Name;

use super::{Admin, RACES_TOLERATED, reason_after, stamp};

impl Admin {
    /// Stores a periodic schedule that every running service enqueues at
    /// each tick (exactly one job per tick, `cron:NAME:TICK`), with a
    /// `schedule_add` audit entry whose reason starts with the definition.
    /// The same definition stored already changes nothing; another one
    /// under the name is refused unless `replace` is set, when it is
    /// replaced (`schedule_replace`; ticks before now are dropped).
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a bad definition, operator or reason, or a
    /// name taken by another definition without `replace`.
    pub async fn add_schedule(&self, req: &ScheduleAdd) -> Result<ScheduleAdded> {
        req.validate()?;
        let def = &req.definition;
        let reason = reason_after(&def.describe(), req.reason.as_deref())?;
        let by = stamp(&req.operator, Some(&reason));
        for _ in 0..RACES_TOLERATED {
            let added = self
                .store
                .change_schedule(&ScheduleChange::Add(def.clone()), &by)
                .await?;
            if let Some(schedule) = added {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Added,
                    schedule,
                });
            }
            let Some(stored) = self.find_schedule(&def.name).await? else {
                continue; // removed meanwhile: add again
            };
            if stored.definition.same_as(def) {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Unchanged,
                    schedule: stored,
                });
            }
            if !req.replace {
                return Err(Error::invalid(format!(
                    "a schedule named `{}` is stored with another definition ({}); ask to replace \
                     it (the CLI's --replace, the API's \"replace\": true), or choose another name",
                    def.name,
                    stored.definition.describe()
                )));
            }
            let replaced = self
                .store
                .change_schedule(&ScheduleChange::Replace(def.clone()), &by)
                .await?;
            if let Some(schedule) = replaced {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Replaced,
                    schedule,
                });
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            def.name
        )))
    }

    /// Deletes a stored schedule (jobs it enqueued stay), with a
    /// `schedule_remove` audit entry whose reason starts with the
    /// definition removed. Returns the schedule as it was.
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`](crate::Error::NoSuchSchedule); [`Error::Invalid`](crate::Error::Invalid) for a bad operator or
    /// reason.
    pub async fn remove_schedule(&self, action: &ScheduleAction) -> Result<StoredSchedule> {
        action.validate()?;
        for _ in 0..RACES_TOLERATED {
            let Some(stored) = self.find_schedule(&action.name).await? else {
                return Err(Error::NoSuchSchedule(action.name.to_string()));
            };
            let change = format!("removed {}", stored.definition.describe());
            let reason = reason_after(&change, action.reason.as_deref())?;
            let by = stamp(&action.operator, Some(&reason));
            // Removed only while it still has the definition the entry
            // records; replaced meanwhile, it is read again.
            let removed = self
                .store
                .change_schedule(&ScheduleChange::Remove(stored.definition), &by)
                .await?;
            if let Some(removed) = removed {
                return Ok(removed);
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            action.name
        )))
    }

    /// Pauses a stored schedule: no service enqueues its ticks until it is
    /// resumed. A `schedule_pause` audit entry; nothing is written when it
    /// was paused already (`changed` is `false`).
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`](crate::Error::NoSuchSchedule); [`Error::Invalid`](crate::Error::Invalid) for a bad operator or
    /// reason.
    pub async fn pause_schedule(&self, action: &ScheduleAction) -> Result<ScheduleActed> {
        self.toggle_schedule(action, true).await
    }

    /// Resumes a paused schedule from now on: ticks missed while it was
    /// paused are not enqueued, whatever its misfire policy. A
    /// `schedule_resume` audit entry; nothing is written when it was not
    /// paused (`changed` is `false`).
    ///
    /// # Errors
    /// As [`Admin::pause_schedule`].
    pub async fn resume_schedule(&self, action: &ScheduleAction) -> Result<ScheduleActed> {
        self.toggle_schedule(action, false).await
    }

    async fn toggle_schedule(&self, action: &ScheduleAction, pause: bool) -> Result<ScheduleActed> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        let change = if pause {
            ScheduleChange::Pause(action.name.clone())
        } else {
            ScheduleChange::Resume(action.name.clone())
        };
        for _ in 0..RACES_TOLERATED {
            if let Some(schedule) = self.store.change_schedule(&change, &by).await? {
                return Ok(ScheduleActed {
                    changed: true,
                    schedule,
                });
            }
            match self.find_schedule(&action.name).await? {
                None => return Err(Error::NoSuchSchedule(action.name.to_string())),
                Some(schedule) if schedule.paused.is_some() == pause => {
                    return Ok(ScheduleActed {
                        changed: false,
                        schedule,
                    });
                }
                Some(_) => {} // toggled meanwhile: try again
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            action.name
        )))
    }

    /// The stored schedules, by name.
    pub async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.store.schedules().await
    }

    /// One stored schedule.
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`](crate::Error::NoSuchSchedule).
    pub async fn schedule(&self, name: &Name) -> Result<StoredSchedule> {
        self.find_schedule(name)
            .await?
            .ok_or_else(|| Error::NoSuchSchedule(name.to_string()))
    }

    async fn find_schedule(&self, name: &Name) -> Result<Option<StoredSchedule>> {
        Ok(self
            .store
            .schedules()
            .await?
            .into_iter()
            .find(|s| &s.definition.name == name))
    }
}
