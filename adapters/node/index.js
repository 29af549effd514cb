'use strict';
// coxswain for Node.js: the verified delivery core (Rust, via N-API) for TypeScript agent
// harnesses. See index.d.ts for the types and README.md ("Node.js") for an example.

const errors = require('./errors');
const { Machine, Transition } = require('./machine');
const { Agent } = require('./agent');
const { FileLog, MemoryLog, encodeRecords, parseLog } = require('./log');

/** A human prompt: `{id, source: {kind: 'user'}, content}`. */
function userMessage(id, content) {
  return { id, source: { kind: 'user' }, content };
}

module.exports = {
  Machine,
  Transition,
  Agent,
  FileLog,
  MemoryLog,
  encodeRecords,
  parseLog,
  userMessage,
  CoxswainError: errors.CoxswainError,
  RejectedError: errors.RejectedError,
  AlreadyPendingError: errors.AlreadyPendingError,
  AlreadyDeliveredError: errors.AlreadyDeliveredError,
  ConflictError: errors.ConflictError,
  TurnMismatchError: errors.TurnMismatchError,
  FullError: errors.FullError,
  UnexpectedCompletionError: errors.UnexpectedCompletionError,
  BusyError: errors.BusyError,
  DisposedError: errors.DisposedError,
  UndrainedError: errors.UndrainedError,
  BatchError: errors.BatchError,
  TooDeepError: errors.TooDeepError,
  IdTooLongError: errors.IdTooLongError,
  MessageTooLargeError: errors.MessageTooLargeError,
  InvalidInputError: errors.InvalidInputError,
  InvalidLogError: errors.InvalidLogError,
  CorruptLogError: errors.CorruptLogError,
  LineTooLongError: errors.LineTooLongError,
  LogIoError: errors.LogIoError,
  LogStorageFullError: errors.LogStorageFullError,
  LogPermissionDeniedError: errors.LogPermissionDeniedError,
  NotRegularFileError: errors.NotRegularFileError,
  LogReplacedError: errors.LogReplacedError,
  LogTruncatedError: errors.LogTruncatedError,
  LogTamperedError: errors.LogTamperedError,
  IndeterminateError: errors.IndeterminateError,
  EncodeError: errors.EncodeError,
  LogFailedError: errors.LogFailedError,
  LockedError: errors.LockedError,
  PersistenceError: errors.PersistenceError,
  StoppedError: errors.StoppedError,
  ClosedError: errors.ClosedError,
  StepClosedError: errors.StepClosedError,
  ReservedTypeError: errors.ReservedTypeError,
  FinalSyncError: errors.FinalSyncError,
  InvalidOptionsError: errors.InvalidOptionsError,
  InvalidRedeliveryError: errors.InvalidRedeliveryError,
};
