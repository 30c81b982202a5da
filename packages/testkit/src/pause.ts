/**
 * Pauses processes (SIGSTOP: a server that keeps its connections open and queues what it is sent, as a frozen or
 * overloaded one does) and returns what resumes them, once. Resume in a `finally`, and again in `afterAll`: a stopped
 * process left behind would stall every suite after it.
 */
export function pauseProcesses(pids: number[]): () => void {
  for (const pid of pids) process.kill(pid, "SIGSTOP");
  let resumed = false;
  return () => {
    if (!resumed) resumeProcesses(pids);
    resumed = true;
  };
}

/** SIGCONT to each process; one gone meanwhile has nothing to resume. */
export function resumeProcesses(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGCONT");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
    }
  }
}
