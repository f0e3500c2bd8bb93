function vantage_inprocess(RData, workspace)
% VANTAGE_INPROCESS  Push each Vantage RcvData frame into an in-process usbeam session
% through MATLAB's Python interface (MATLAB R2022a+; pyenv set to the Python that has
% usbeam installed).  One function file, two uses:
%
%   vantage_inprocess('start', 'MySetup.mat')   % once, after the SetUp script was saved
%   vantage_inprocess(RData)                    % the External process function, per frame
%
% In the SetUp script:
%   EF(1).Function = vsv.seq.function.ExFunctionDef('vantage_inprocess', @vantage_inprocess);
%   Process(1).classname = 'External';
%   Process(1).method = 'vantage_inprocess';
%   Process(1).Parameters = {'srcbuffer','receive', 'srcbufnum',1, 'srcframenum',-1, ...
%                            'dstbuffer','none'};
% and an Event with .process = 1 after each frame's transfer to the host.
% RData is RcvData{1}(:,:,frame): int16, rows x channels.  The usbeam session maps the
% channels while copying the frame into its slot, so this returns at once; the image (the
% workspace's own beamformer, usbeam.Pipeline.from_vantage: nz x nx on the PData grid) is
% shown from the newest processed frame.
% Not run against hardware, nor in MATLAB: GNU Octave has no Python interface in Debian's
% packages (tests/live/test_vantage_octave.py skips this route, saying so), and
% tests/live/test_live_vantage.py calls the same Python functions (examples/vantage_bridge.py)
% with arrays laid out as the Vantage lays them out.  The MEX route (vantage_shm.m) is tested
% in Octave end to end.

persistent hImage
if ischar(RData) && strcmp(RData, 'start')
    here = fileparts(mfilename('fullpath'));
    if count(py.sys.path, here) == 0
        insert(py.sys.path, int32(0), here);
    end
    py.vantage_bridge.start(workspace, int32(3), 'drop_oldest');
    hImage = [];
    return
end

% MATLAB hands the int16 matrix to NumPy without a copy (column-major).
py.vantage_bridge.push(RData);
img = uint8(py.vantage_bridge.latest());
if ~isempty(img)
    if isempty(hImage) || ~isvalid(hImage)
        figure; hImage = imagesc(img); colormap gray; axis image;
    else
        set(hImage, 'CData', img);
    end
    drawnow limitrate;
end
end
