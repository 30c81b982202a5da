/**
 * `make`, remembered per object. Store records are immutable, so the message made from one (or an answer built around
 * it) can be shared by every reader: a hot read then builds nothing. Held weakly: a record the store drops takes what
 * was made from it along.
 */
export function perRecord<R extends object, M>(make: (record: R) => M): (record: R) => M {
  const made = new WeakMap<R, M>();
  return (record) => {
    let m = made.get(record);
    if (m === undefined) made.set(record, (m = make(record)));
    return m;
  };
}
