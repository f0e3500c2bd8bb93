function vantage_shm(RData, Trans, Receive, Resource)
% VANTAGE_SHM  Push each Vantage RcvData frame to an out-of-process usbeam server through
% the C client library (loadlibrary/calllib; no Python inside MATLAB).  Two uses:
%
%   vantage_shm('start', Trans, Receive, Resource)   % once, after the SetUp script
%   vantage_shm(RData)                               % the External process function, per frame
%
% Before: start the beamforming process in a shell,
%   OMP_WAIT_POLICY=passive python -m usbeam serve --name /usbeam --slot-bytes 67108864 \
%       --pipeline mypipe.py:make_pipeline
% and build the library with `make client` (build/libusbeam_client.so; header
% csrc/usbeam_client.h; both on MATLAB's path).  In the SetUp script:
%   EF(1).Function = vsv.seq.function.ExFunctionDef('vantage_shm', @vantage_shm);
%   Process(1).classname = 'External'; Process(1).method = 'vantage_shm';
%   Process(1).Parameters = {'srcbuffer','receive', 'srcbufnum',1, 'srcframenum',-1, ...
%                            'dstbuffer','none'};
% Not run against hardware (nor in MATLAB) here: tests/test_live_shm.py drives the same
% library entry points with Vantage-laid-out frames, including the one-acquisition
% parameters jsonencode produces, and examples/shm_client.c is the same in C.

persistent client image hImage
if ischar(RData) && strcmp(RData, 'start')
    if ~libisloaded('libusbeam_client')
        loadlibrary('libusbeam_client.so', 'usbeam_client.h');
    end
    client = calllib('libusbeam_client', 'usbeam_client_open', '/usbeam', int32(5000));
    if isNull(client)
        error('usbeam: %s', calllib('libusbeam_client', 'usbeam_client_last_error'));
    end
    % the acquisitions of frame 1 of buffer 1 (srcbufnum above), in acqNum order, as
    % usbeam.io.load_vantage reads them (it also refuses HVMux apertures, not checked here)
    rx = Receive([Receive.bufnum] == 1 & [Receive.framenum] == 1);
    [~, order] = sort([rx.acqNum]);
    rx = rx(order);
    if isfield(Trans, 'Connector') && ~isempty(Trans.Connector)
        wiring = Trans.Connector;
    else
        wiring = Trans.ConnectorES;     % the name in newer Vantage software
    end
    params.frame = struct('shape', [Resource.RcvBuffer(1).rowsPerFrame, Resource.RcvBuffer(1).colsPerFrame], ...
                          'dtype', 'int16', 'order', 'F');
    % Index lists go as cell arrays: jsonencode writes a cell as a JSON array even with one
    % element, where a 1x1 numeric array would become a bare number (the server accepts
    % both, but other readers of the parameters may not).  Fields are assigned one by one:
    % struct('name', c) with a cell c would make a struct array.
    cmap.element_channel = num2cell(double(wiring(:)') - 1);
    cmap.acquisition_row = num2cell(double([rx.startSample]) - 1);
    cmap.n_samples = rx(1).endSample - rx(1).startSample + 1;
    params.channel_map = cmap;
    params.c = Resource.Parameters.speedOfSound;
    params.fc = Trans.frequency * 1e6;
    check(calllib('libusbeam_client', 'usbeam_client_set_params', client, jsonencode(params)));
    image = libpointer('uint8Ptr', zeros(1, 4 * 2^20, 'uint8'));
    hImage = [];
    return
end

frameId = libpointer('uint64Ptr', uint64(0));
% RData is int16 rows x channels, column-major: its bytes go as they are.
check(calllib('libusbeam_client', 'usbeam_client_push', client, RData, ...
              uint64(numel(RData) * 2), int32(100), frameId));
info = libstruct('usbeam_client_result');
status = calllib('libusbeam_client', 'usbeam_client_get_result', client, frameId.Value, ...
                 image, uint64(4 * 2^20), int32(100), info);
if status == 0
    shape = double(info.shape(1:info.ndim));
    img = reshape(image.Value(1:prod(shape)), fliplr(shape));   % C order -> MATLAB order
    if isempty(hImage) || ~isvalid(hImage)
        figure; hImage = imagesc(img); colormap gray; axis image;
    else
        set(hImage, 'CData', img);
    end
    drawnow limitrate;
end
end

function check(status)
if status ~= 0
    error('usbeam: %s', calllib('libusbeam_client', 'usbeam_client_last_error'));
end
end
