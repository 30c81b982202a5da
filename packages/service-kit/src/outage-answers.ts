import type { Logger } from "./logger.js";

/** An episode ends once no outage answer of its kind came for this long. */
export const OUTAGE_QUIET_MS = 5_000;
/** While an episode lasts, how often its count so far is logged. */
export const OUTAGE_SUMMARY_MS = 60_000;

interface Episode {
  startedAt: number;
  lastAt: number;
  /** Answers since the episode started, and since the last summary line. */
  answers: number;
  sinceSummary: number;
  summarizedAt: number;
  lastMessage: string;
}

export interface OutageAnswers {
  /** One answer an outage explains (503 unavailable, 504 deadline_exceeded), with its log fields and message. */
  report(code: string, fields: Record<string, unknown>, message: string): void;
  /** Ends every open episode with its summary line now (shutdown; tests). */
  flush(): void;
}

/**
 * The log lines of the answers an outage causes. A store outage answers every request 503 (or 504 for a write whose
 * outcome is unknown): one warning per answer buried everything else at 20 requests a second (470 identical lines in a
 * 20 s Redis outage), and no line said when it ended. Per kind of answer (its code), an episode logs:
 * - its first answer, whole, at warn (what happened and what to do, as every answer says);
 * - every minute while it lasts, how many answers it caused since, with the latest message, at warn;
 * - when no such answer came for {@link OUTAGE_QUIET_MS}, that it ended: how many answers over how long, at info.
 */
export function outageAnswers(logger: Logger, options: { now?: () => number; quietMs?: number; summaryMs?: number } = {}): OutageAnswers {
  const now = options.now ?? Date.now;
  const quietMs = options.quietMs ?? OUTAGE_QUIET_MS;
  const summaryMs = options.summaryMs ?? OUTAGE_SUMMARY_MS;
  const episodes = new Map<string, Episode>();
  let timer: NodeJS.Timeout | undefined;

  const end = (code: string, e: Episode) => {
    episodes.delete(code);
    const seconds = Math.round((e.lastAt - e.startedAt) / 100) / 10;
    logger.info({ code, answers: e.answers, seconds }, `outage answers ended: ${e.answers} answer(s) ${code} over ${seconds} s; the last: ${e.lastMessage}`);
  };
  // One timer for all episodes, only while one is open (no timer, no cost, in normal operation).
  const check = () => {
    const t = now();
    for (const [code, e] of episodes) {
      if (t - e.lastAt >= quietMs) end(code, e);
      else if (t - e.summarizedAt >= summaryMs && e.sinceSummary > 0) {
        logger.warn({ code, answers: e.sinceSummary, total: e.answers }, `outage continues: ${e.sinceSummary} more answer(s) ${code} in the last ${Math.round((t - e.summarizedAt) / 1000)} s; the last: ${e.lastMessage}`);
        e.sinceSummary = 0;
        e.summarizedAt = t;
      }
    }
    if (episodes.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    report(code, fields, message) {
      const t = now();
      const open = episodes.get(code);
      if (open) {
        open.answers++;
        open.sinceSummary++;
        open.lastAt = t;
        open.lastMessage = message;
        return;
      }
      episodes.set(code, { startedAt: t, lastAt: t, answers: 1, sinceSummary: 0, summarizedAt: t, lastMessage: message });
      logger.warn({ ...fields, code, outage: `first answer ${code} of an outage: further ones are counted, and their number is logged when they stop` }, message);
      if (!timer) {
        timer = setInterval(check, Math.min(quietMs, summaryMs) / 2);
        timer.unref();
      }
    },
    flush() {
      for (const [code, e] of episodes) end(code, e);
      clearInterval(timer);
      timer = undefined;
    },
  };
}

const byLogger = new WeakMap<Logger, OutageAnswers>();

/** The process's outage log for `logger`: every site that answers outages with the same logger shares its episodes. */
export function outageAnswersOf(logger: Logger): OutageAnswers {
  let answers = byLogger.get(logger);
  if (!answers) byLogger.set(logger, (answers = outageAnswers(logger)));
  return answers;
}
